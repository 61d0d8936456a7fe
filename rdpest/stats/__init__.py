"""Pure statistics, no state: confidence bounds, certificates, exact divergences, conversions.

- :mod:`rdpest.stats.bounds`: concentration inequalities for a mean (Hoeffding, empirical
  Bernstein, betting), Clopper–Pearson limits and Markov's bound.
- :mod:`rdpest.stats.certificates`: certified lower bounds on D_α for a fixed critic (the
  variational bracket) or a fixed threshold test.
- :mod:`rdpest.stats.divergences`: exact Rényi divergences of the benchmark families (their
  log-space quadrature lives in :mod:`rdpest.stats.quadrature`).
- :mod:`rdpest.stats.efficiency`: the smallest standard error with which any estimator can
  estimate D_α from two samples (the semiparametric efficiency bound).
- :mod:`rdpest.stats.conversions`: RDP, (ε, δ)-DP and μ-GDP conversions and DP-SGD's ε_α (the
  μ-GDP privacy profile lives in :mod:`rdpest.stats.gdp`).
"""

"""Helpers with no statistics in them: argument validation, atomic file writes, torch scoping.

``rdpest.utils.validation`` and ``rdpest.utils.io`` import only numpy and the standard library;
``rdpest.utils.torch_helpers`` is the one module here that imports torch.
"""

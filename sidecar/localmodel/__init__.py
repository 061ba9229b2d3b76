"""The embedded local model (issue 15): the packaged GGUF, its one-time conversion, and the worker that runs it.

The sidecar itself never imports openvino: :mod:`.assets` (stdlib only) finds and assembles the weights,
:mod:`.client` drives :mod:`.worker`, a supervised child process that loads the runtime.
"""

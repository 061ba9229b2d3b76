"""Static rendering (phase-2 §10.4, §12): Mermaid in a warm Chromium, function plots and TeX maths in pure
Python, every SVG sanitised, results cached on disk. See :mod:`sidecar.render.service`."""

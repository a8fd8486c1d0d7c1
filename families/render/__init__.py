"""The render family: code that draws (charts, scenes), rendered in the sandbox
(harnesses/render.py) and compared with the reference's render by the `render` verifier."""

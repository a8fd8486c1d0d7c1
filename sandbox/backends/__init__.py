"""The built-in sandbox backends, one module each: `local` (bubblewrap, warm pool), `docker`
(and gVisor), `unsafe` (`unsafe-subprocess`, debugging only).

This package is the home of the backend registry: on its first miss the registry imports every
public module here, so adding a backend is one file with a `@register_backend(name)` class. Only
backends live here; the machinery they share stays one level up.
"""

"""qgold_gen: golden fixture generators for qgold, written from reference/spec/*.md.

The package never imports or calls the C reference; its only inputs are the specs.
"""

__version__ = "1.0.0"

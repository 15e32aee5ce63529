"""qcat: e-commerce query categorization into the leaf categories of a product taxonomy.

This package is the serving runtime. It never imports TensorFlow or training code.
"""

__version__ = "0.1.0"

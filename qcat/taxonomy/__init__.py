"""Product taxonomies: nodes with ids and paths, parents, leaves and a content hash.

Three file formats load into the same :class:`Taxonomy`:

* ``tsv``/``csv``: a header with ``id`` and ``path`` columns, paths joined by `` > ``;
* ``google``: Google's product taxonomy, ``ID - A > B > C`` per line, ``#`` comments;
* ``bestbuy``: Best Buy's category JSON, a list of ``{id, name, path[], subCategories[]}``
  (optionally gzip-compressed); ancestors that appear only inside other records' paths
  become nodes too.

In the path formats every prefix of a path must itself be a node (the optional
``parent`` column of a TSV/CSV names it by id instead); Best Buy names parents by id.
Loaders add nothing silently: a missing parent is an error naming the file and row, and so are
parent links that form a cycle or contradict the paths (a node's parent must be the node whose
path is its own less the last name: ``L  Toys > Lego  parent P`` where P is ``Shoes`` is refused,
never filed under Shoes). In Best Buy's JSON the ``path`` of each record is the truth: a node's
parent is the next-to-last step of its path, and the ``subCategories`` cross-links are not read,
so where they disagree with the paths, the paths win.

The taxonomy itself lives in :mod:`qcat.taxonomy.tree`, its files' readers in
:mod:`qcat.taxonomy.files`; both are importable from here (``from qcat.taxonomy import Taxonomy,
load_taxonomy``).
"""

from qcat.taxonomy.files import FORMATS, GOOGLE_LINES, TAXONOMY_TABLE, detect_format, load_taxonomy
from qcat.taxonomy.tree import AMBIGUOUS, OTHER_LEAF, OTHER_SUFFIX, SEPARATOR, Taxonomy, check_tree, from_paths

__all__ = ["AMBIGUOUS", "FORMATS", "GOOGLE_LINES", "OTHER_LEAF", "OTHER_SUFFIX", "SEPARATOR", "TAXONOMY_TABLE", "Taxonomy",
           "check_tree", "detect_format", "from_paths", "load_taxonomy"]

import gzip
import json

import pytest

from qcat.errors import TaxonomyError
from qcat.taxonomy import from_paths, load_taxonomy


def test_google_format(data_dir):
    taxonomy = load_taxonomy(data_dir / "google_product_taxonomy_2021-09-21.txt")
    assert len(taxonomy) == 5595
    assert len(taxonomy.leaves) == 4719
    assert taxonomy.path_of("3237") == "Animals & Pet Supplies > Live Animals"
    assert taxonomy.parent("3237") == "1"
    assert taxonomy.parent("1") is None


def test_bestbuy_format(data_dir):
    taxonomy = load_taxonomy(data_dir / "bestbuy_categories_2016.json.gz")
    # 4,584 records plus 139 ancestors named only inside other records' paths.
    assert len(taxonomy) == 4723
    assert taxonomy.parent("abcat0020001") == "abcat0020000"
    assert taxonomy.path_of("abcat0020001") == "Gift Ideas > Kids > Toys > Learning Toys"
    # Best Buy repeats a path under two ids: ids work, the path cannot name a category.
    assert taxonomy.path_of("cat02818") == taxonomy.path_of("cat02843")
    with pytest.raises(TaxonomyError, match="several ids"):
        taxonomy.resolve(taxonomy.path_of("cat02818"))


def test_tsv_and_csv_formats_round_trip(tmp_path, data_dir):
    google = load_taxonomy(data_dir / "google_product_taxonomy_2021-09-21.txt")
    google.save_tsv(tmp_path / "g.tsv")
    assert load_taxonomy(tmp_path / "g.tsv") == google
    (tmp_path / "t.csv").write_text('id,path\n1,Toys\n2,"Toys > Trains, Sets"\n3,Toys > Dolls\n')
    small = load_taxonomy(tmp_path / "t.csv")
    assert small.leaves == ("2", "3")
    assert small.resolve("Toys > Trains, Sets") == "2"
    assert small.resolve("Toys>Dolls") == "3"
    assert small.resolve("2") == "2"
    assert small.resolve("Toys > Cars") is None


def test_content_hash_ignores_order_and_format(tmp_path):
    a = from_paths(["A > B", "A > C"])
    (tmp_path / "t.tsv").write_text("id\tpath\nc3\tA > C\nc1\tA\nc2\tA > B\n")
    b = load_taxonomy(tmp_path / "t.tsv")
    assert a.content_hash == b.content_hash
    assert from_paths(["A > B", "A > D"]).content_hash != a.content_hash


def test_from_paths_adds_prefixes_with_stable_ids():
    taxonomy = from_paths(["Toys > Trains > Sets", "Toys > Dolls"])
    assert taxonomy.ids == ("c1", "c2", "c3", "c4")
    assert [taxonomy.path_of(i) for i in taxonomy.ids] == ["Toys", "Toys > Dolls", "Toys > Trains", "Toys > Trains > Sets"]
    assert taxonomy.leaves == ("c2", "c4")
    sub = taxonomy.subset(["c4"])
    assert sub.ids == ("c1", "c3", "c4") and sub.parent("c4") == "c3"


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("bad.tsv", "id\tpath\n1\tA\n2\tA > B > C\n", "line|no parent"),
        ("dup.tsv", "id\tpath\n1\tA\n1\tB\n", "appears twice"),
        ("nohead.tsv", "x\ty\n1\tA\n", "header"),
        ("google.txt", "# Google_Product_Taxonomy_Version\n1 - A\nnot a line\n", r"google\.txt:3: expected 'ID - A > B'"),
        ("empty.tsv", "id\tpath\n", "no categories"),
    ],
)
def test_malformed_files_name_the_problem(tmp_path, name, content, message):
    (tmp_path / name).write_text(content)
    with pytest.raises(TaxonomyError, match=message) as info:
        load_taxonomy(tmp_path / name)
    assert name in str(info.value)


def test_bad_json_and_missing_file(tmp_path):
    (tmp_path / "bb.json.gz").write_bytes(gzip.compress(json.dumps([{"id": "x"}]).encode()))
    with pytest.raises(TaxonomyError, match="record 1"):
        load_taxonomy(tmp_path / "bb.json.gz")
    with pytest.raises(TaxonomyError, match="missing.tsv: no such file"):
        load_taxonomy(tmp_path / "missing.tsv")
    (tmp_path / "latin.tsv").write_bytes(b"id\tpath\n1\tCaf\xe9\n")
    with pytest.raises(TaxonomyError, match=r"latin\.tsv:2: not valid UTF-8"):
        load_taxonomy(tmp_path / "latin.tsv")

"""``webhook.documents``: the one reader every edge uses (validate, test, reconcile, the state,
the policies, the CRDs)."""

from __future__ import annotations

import io
import json

from webhook import documents
from webhook.document_limits import MAX_DEPTH


def test_every_document_knows_its_file_line_and_index():
    text = "# a comment\na: 1\n---\n---\nb: 2\n...\n---\n\n  [1, 2]\n"
    parsed = documents.parse(text, "x.yaml")
    assert parsed.error is None
    assert [(d.origin.line, d.origin.index, d.content) for d in parsed.documents] == [
        (2, 0, {"a": 1}), (5, 2, {"b": 2}), (9, 3, [1, 2])]  # the empty document keeps its index
    assert parsed.documents[1].where == "x.yaml:5"
    assert parsed.documents[1].origin.as_dict() == {"file": "x.yaml", "line": 5, "index": 2}


def test_lists_are_unwrapped_and_their_items_keep_the_lists_place():
    items = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"c{i}"}} for i in range(3)]
    text = "a: 1\n---\n" + json.dumps({"apiVersion": "v1", "kind": "List", "items": items}, indent=1)
    text += "\n---\n" + json.dumps({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinitionList",
                                    "items": items[:1]})
    docs = documents.parse(text, "l.json").documents
    last = text[:text.rindex("---")].count("\n") + 2
    assert [(d.origin.line, d.origin.index, d.origin.item) for d in docs] == [
        (1, 0, None), (3, 1, 0), (3, 1, 1), (3, 1, 2), (last, 2, 0)]
    assert [d.content for d in docs[1:4]] == items
    assert docs[2].origin.as_dict() == {"file": "l.json", "line": 3, "index": 1, "item": 1}
    kept = documents.parse(text, "l.json", unwrap_lists=False).documents
    assert [d.content.get("kind") for d in kept] == [None, "List", "CustomResourceDefinitionList"]


def test_broken_yaml_is_a_result_with_its_line_and_the_documents_before_it_are_kept():
    parsed = documents.parse("a: 1\n---\nb: [\n", "bad.yaml")
    assert [d.content for d in parsed.documents] == [{"a": 1}]
    assert str(parsed.error) == "bad.yaml:4: invalid YAML: did not find expected node content"


def test_the_one_nesting_limit_holds_for_documents_aliases_make_deep():
    text = "a: &a [1]\n" + "".join(f"l{i}: &l{i} [*{'a' if i == 0 else f'l{i - 1}'}]\n" for i in range(MAX_DEPTH + 5))
    parsed = documents.parse("ok: 1\n---\n" + text, "deep.yaml")
    assert [d.content for d in parsed.documents] == [{"ok": 1}]
    assert parsed.error.where == "deep.yaml:3" and f"nested more than {MAX_DEPTH} levels deep" in parsed.error.message


def test_node_lines_point_inside_a_document():
    text = "kind: X\nspec:\n  validations:\n  - expression: a\n  - expression: |\n      b\n"
    (doc,) = documents.parse(text, "p.yaml", node_lines=True).documents
    assert doc.line_of(("spec", "validations", 1, "expression")) == 5
    assert doc.line_of(("spec", "validations", 7)) == 3  # the nearest ancestor the file has
    assert doc.where_of(("kind",)) == "p.yaml:1"


def test_directories_are_read_recursively_skipping_hidden_entries_and_other_files(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / ".git").mkdir()
    (tmp_path / "b" / "two.yml").write_text("n: 2\n")
    (tmp_path / "a.json").write_text('{"n": 1}')
    (tmp_path / "c.yaml").write_text("n: 3\n---\nn: [\n")
    (tmp_path / "empty.yaml").write_text("")
    (tmp_path / "notes.txt").write_text("n: 9\n")
    (tmp_path / ".hidden.yaml").write_text("n: 9\n")
    (tmp_path / ".git" / "x.yaml").write_text("n: 9\n")
    (tmp_path / "b" / "loop").symlink_to(tmp_path)  # followed once, never in a loop
    found, errors = documents.read([tmp_path, tmp_path / "missing.yaml"])
    assert [(d.origin.file, d.content) for d in found] == [
        (str(tmp_path / "a.json"), {"n": 1}), (str(tmp_path / "b" / "two.yml"), {"n": 2}),
        (str(tmp_path / "c.yaml"), {"n": 3})]
    assert [str(e) for e in errors] == [f"{tmp_path / 'c.yaml'}:4: invalid YAML: did not find expected node content",
                                        f"{tmp_path / 'missing.yaml'}: no such file or directory"]
    inputs = documents.read_inputs([tmp_path])
    assert [i.name for i in inputs] == [str(tmp_path / n) for n in ("a.json", "b/two.yml", "c.yaml", "empty.yaml")]


def test_stdin_and_unreadable_files(tmp_path, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("a: 1\n---\nb: 2\n"))
    (tmp_path / "latin1.yaml").write_bytes(b"a: \xe9\n")
    found, errors = documents.read(["-", tmp_path / "latin1.yaml"])
    assert [(d.where, d.content) for d in found] == [("-:1", {"a": 1}), ("-:3", {"b": 2})]
    assert len(errors) == 1 and errors[0].where == str(tmp_path / "latin1.yaml")
    assert "cannot read: not UTF-8 text" in errors[0].message


def test_the_apis_kind_lists_leave_their_items_kind_out_and_it_is_filled_in():
    text = json.dumps({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinitionList",
                       "items": [{"metadata": {"name": "a.example.com"}},
                                 {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                                  "metadata": {"name": "b.example.com"}}]})
    docs = documents.parse(text, "crds.json").documents
    assert [(d.content["apiVersion"], d.content["kind"], d.content["metadata"]["name"]) for d in docs] == [
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition", "a.example.com"),
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition", "b.example.com")]

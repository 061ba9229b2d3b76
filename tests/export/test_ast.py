"""Markdown → Document AST: every §10.3 node type (and our extras), stable ids, GFM details, footnotes, maths."""

from __future__ import annotations

from sidecar.export.ast import EXTRA_NODE_TYPES, NODE_TYPES, parse_markdown

SOURCE = """# 标题 *Title*

Para with **bold**, *em*, ~~gone~~, `code`, [link](https://example.com "t"), www.example.org,
<https://auto.example> and $a^2$ then a hard break\\
next line.[^n]

- outer
  - inner
    1. deep ordered
- [x] done
- [ ] todo

3. three
4. four

| L | R | C | N |
|:--|--:|:-:|---|
| 1 | 2 | 3 | 4 |

> quoted *text*

```python
print("hi")
```

```mermaid
graph TD; A-->B
```

```function_plot
expressions: [sin(x)]
```

$$
x = \\frac{1}{2}
$$

![alt text](attachment:att_1)

<div>raw</div>

---

[^n]: The *note*.
"""


def _types(doc) -> list[str]:
    return [n.type for n in doc.walk()] + [n.type for f in doc.footnotes for n in f.walk()]


def test_every_node_type_is_produced() -> None:
    doc = parse_markdown(SOURCE)
    seen = set(_types(doc))
    assert set(NODE_TYPES) <= seen, set(NODE_TYPES) - seen
    assert set(EXTRA_NODE_TYPES) <= seen, set(EXTRA_NODE_TYPES) - seen


def test_same_source_same_ids_and_ids_are_unique() -> None:
    a, b = parse_markdown(SOURCE).to_dict(), parse_markdown(SOURCE).to_dict()
    assert a == b
    doc = parse_markdown(SOURCE)
    ids = [n.node_id for n in doc.walk()] + [n.node_id for f in doc.footnotes for n in f.walk()]
    assert len(ids) == len(set(ids)) and all(i.startswith("node_") for i in ids)
    node = a["children"][0]
    assert set(node) == {"node_id", "type", "attributes", "children", "text"}  # the seed's discriminator fields
    assert node["type"] == "heading" and node["attributes"]["level"] == 1 and node["text"] == "标题 Title"


def test_gfm_details() -> None:
    doc = parse_markdown(SOURCE)
    lists = [n for n in doc.walk() if n.type == "list"]
    outer, inner, deep, tasks_list, numbered = lists[0], lists[1], lists[2], lists[0], lists[3]
    assert not outer.attributes["ordered"] and inner in outer.children[0].children and deep.attributes["ordered"]
    items = list(tasks_list.children)
    assert [i.attributes["checked"] for i in items] == [None, True, False]
    assert items[1].plain_text() == "done"  # the [x] marker is not text
    assert numbered.attributes == {"ordered": True, "start": 3, "tight": True}
    table = next(n for n in doc.walk() if n.type == "table")
    assert table.attributes["align"] == ["left", "right", "center", None]
    assert table.children[0].attributes["header"] and not table.children[1].attributes["header"]
    links = [n for n in doc.walk() if n.type == "link"]
    assert [link.attributes["href"] for link in links] == [
        "https://example.com",
        "http://www.example.org",
        "https://auto.example",
    ]
    assert links[0].attributes["title"] == "t"
    math = [n for n in doc.walk() if n.type.startswith("math")]
    assert [(m.type, m.text) for m in math] == [("math_inline", "a^2"), ("math_block", "x = \\frac{1}{2}")]
    code = next(n for n in doc.walk() if n.type == "code_block")
    assert code.attributes["language"] == "python" and code.text == 'print("hi")\n'
    image = next(n for n in doc.walk() if n.type == "image")
    assert image.attributes["src"] == "attachment:att_1" and image.attributes["alt"] == "alt text"
    assert next(n for n in doc.walk() if n.type == "mermaid").text == "graph TD; A-->B\n"
    assert any(n.type == "line_break" and n.attributes["hard"] for n in doc.walk())


def test_footnotes_and_title() -> None:
    doc = parse_markdown(SOURCE)
    ref = next(n for n in doc.walk() if n.type == "footnote_ref")
    assert ref.attributes == {"label": "n", "index": 1}
    assert [f.attributes["index"] for f in doc.footnotes] == [1]
    assert doc.footnotes[0].plain_text() == "The note."
    assert doc.title == "标题 Title"
    assert parse_markdown("no heading", title="Given").title == "Given"
    assert parse_markdown("").title == "Untitled"


def test_heading_anchors_are_unique() -> None:
    doc = parse_markdown("# A\n\n## A\n\n## 中文 标题\n")
    assert [h.attributes["anchor"] for h in doc.headings] == ["a", "a-1", "中文-标题"]


def test_deep_nesting_is_bounded() -> None:
    doc = parse_markdown(">" * 200 + " deep")
    depth, node = 0, doc.root
    while node.children:
        node, depth = node.children[0], depth + 1
    assert depth <= 70


def test_characters_xml_cannot_hold_are_replaced_not_dropped() -> None:
    doc = parse_markdown("a\x1b[1mb\x0cc\x0bd\ufffee\x7f", "T\x0ct")
    text = "".join(n.text or "" for n in doc.walk() if n.type == "text")
    assert text == "a\ufffd[1mb c d\ufffde\x7f" and doc.title == "T t"

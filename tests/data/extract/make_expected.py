"""Rebuild expected_snippets.json from trafilatura 1.1.0's sdist.

    .venv/bin/pip download --no-deps --no-binary :all: trafilatura==1.1.0 -d /tmp/traf
    tar xzf /tmp/traf/trafilatura-1.1.0.tar.gz -C /tmp/traf
    .venv/bin/python tests/data/extract/make_expected.py /tmp/traf/trafilatura-1.1.0/tests/realworld_tests.py \\
        tests/data/extract/expected_snippets.json

Every ``'snippet' in result`` / ``'snippet' not in result`` comparison of ``test_extract`` is kept, with the
URL of the ``load_mock_page`` call before it; comparisons under ``if xmloutput is False:`` apply to text output
and are kept; commented-out assertions are not code and are not kept.
"""
import ast, json, sys
src = open(sys.argv[1], encoding='utf-8').read()
tree = ast.parse(src)
mock = None
for node in tree.body:
    if isinstance(node, ast.Assign) and node.targets[0].id == 'MOCK_PAGES':
        mock = ast.literal_eval(node.value)
fn = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == 'test_extract'][0]
pages = {}
cur = None
def walk(stmts):
    global cur
    for st in stmts:
        if isinstance(st, ast.Assign) and isinstance(st.value, ast.Call) and getattr(st.value.func, 'id', '') == 'load_mock_page':
            cur = ast.literal_eval(st.value.args[0])
            pages.setdefault(cur, {"file": mock[cur], "must": [], "must_not": []})
        elif isinstance(st, ast.Assert):
            t = st.test
            ops = t.values if isinstance(t, ast.BoolOp) else [t]
            for op in ops:
                if isinstance(op, ast.Compare) and isinstance(op.left, ast.Constant) and len(op.ops) == 1:
                    key = "must" if isinstance(op.ops[0], ast.In) else "must_not" if isinstance(op.ops[0], ast.NotIn) else None
                    if key:
                        pages[cur][key].append(op.left.value)
        elif isinstance(st, ast.If):
            # "if xmloutput is False:" blocks apply to plain-text output
            walk(st.body)
walk(fn.body)
out = {"origin": "trafilatura==1.1.0 sdist, tests/realworld_tests.py::test_extract (txt output); commented-out asserts excluded",
       "pages": pages}
json.dump(out, open(sys.argv[2], 'w', encoding='utf-8'), ensure_ascii=False, indent=1)
print(len(pages), sum(len(p['must']) for p in pages.values()), sum(len(p['must_not']) for p in pages.values()))

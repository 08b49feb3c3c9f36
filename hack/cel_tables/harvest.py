"""Regenerate tests/data/dra_tables/cel.yaml: kube's DRA CEL test table and Kubernetes CEL library cases, each
with the outcome kube's own compiler gives (k8s.io/dynamic-resource-allocation v0.36.3 with kube-scheduler
v1.36's default gates).

Facts only: kube's test table is dumped as data by a throw-away test added to a scratch copy of the package,
library expressions are read from kube's library tests (ip_test.go, cidr_test.go) and documentation, and every
expected outcome is computed by running kube's compiler (oracle.go.txt) on it. Needs Go and the module cache.

    python hack/cel_tables/harvest.py
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
MODCACHE = Path(subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True,
                               check=True).stdout.strip())
DRA = MODCACHE / "k8s.io" / "dynamic-resource-allocation@v0.36.3"
LIBRARY = MODCACHE / "k8s.io" / "apiserver@v0.36.3" / "pkg" / "cel" / "library"
OUT = ROOT / "tests" / "data" / "dra_tables" / "cel.yaml"
GO_MOD = """module celoracle
go 1.24
require (
\tk8s.io/api v0.36.3
\tk8s.io/dynamic-resource-allocation v0.36.3
)
"""
DUMP_TEST = """package cel
import ("encoding/json"; "os"; "testing")
func TestZZDump(t *testing.T) {
\trows := []map[string]any{}
\tfor name, tc := range testcases {
\t\tenv := ""
\t\tif tc.envType != nil { env = string(*tc.envType) }
\t\trows = append(rows, map[string]any{"name": name, "env": env, "consumable": tc.enableConsumableCapacity,
\t\t\t"listTypes": tc.enableListTypeAttributes, "expression": tc.expression, "driver": tc.driver,
\t\t\t"allowMultipleAllocations": tc.allowMultipleAllocations, "attributes": tc.attributes,
\t\t\t"capacity": tc.capacity, "compileError": tc.expectCompileError, "matchError": tc.expectMatchError,
\t\t\t"match": tc.expectMatch, "cost": tc.expectCost})
\t}
\tb, _ := json.Marshal(rows)
\t_ = os.WriteFile(os.Getenv("DUMP_TO"), b, 0o644)
}
"""
#: the device library cases run against (attributes in resource.k8s.io/v1 form)
DEVICE = {"driver": "dra.example.com", "attributes": {
    "ip": {"string": "10.1.2.3"}, "ip6": {"string": "2001:db8::68"}, "cidr": {"string": "10.0.0.0/8"},
    "url": {"string": "https://user:pw@example.com:8080/a%20b/c?x=1&x=2&y=#frag"},
    "name": {"string": "gpu-7-a100"},
    "model": {"string": "a100"}, "numa": {"int": 1}, "fw": {"version": "1.10.3"}},
    "capacity": {"memory": {"value": "40Gi"}}}
#: documented examples of kube's URL, regex and lists libraries and cel-go extensions of the base environment
EXTRA = [
    "url('https://user:pass@example.com:80/path?query=val#fragment').getScheme() == 'https'",
    "isURL('https://user:pass@example.com:80/path?query=val#fragment')",
    "isURL('/absolute-path')",
    "isURL('https://a:b:c/')",
    "isURL('../relative-path')",
    "url('/path').getScheme() == ''",
    "url('https://example.com:80/').getHost() == 'example.com:80'",
    "url('https://example.com/').getHost() == 'example.com'",
    "url('https://[::1]:80/').getHost() == '[::1]:80'",
    "url('https://[::1]/').getHost() == '[::1]'",
    "url('/path').getHost() == ''",
    "url('https://example.com:80/').getHostname() == 'example.com'",
    "url('https://127.0.0.1:80/').getHostname() == '127.0.0.1'",
    "url('https://[::1]:80/').getHostname() == '::1'",
    "url('/path').getHostname() == ''",
    "url('https://example.com:80/').getPort() == '80'",
    "url('https://example.com/').getPort() == ''",
    "url('/path').getPort() == ''",
    "url('https://example.com/path').getEscapedPath() == '/path'",
    "url('https://example.com/path with spaces/').getEscapedPath() == '/path%20with%20spaces/'",
    "url('https://example.com').getEscapedPath() == ''",
    "url('https://example.com/path?k1=a&k2=b&k2=c').getQuery() == {'k1': ['a'], 'k2': ['b', 'c']}",
    "url('https://example.com/path?key with spaces=value with spac"
    "es').getQuery() == {'key with spaces': ['value with spaces']}",
    "url('https://example.com/path?').getQuery() == {}",
    "url('https://example.com/path').getQuery() == {}",
    "url('not a url').getScheme() == ''",
    "url(device.attributes['dra.example.com'].url).getPort() == '8080'",
    "url(device.attributes['dra.example.com'].url).getEscapedPath() == '/a%20b/c'",
    "url(device.attributes['dra.example.com'].url).getQuery()['x'] == ['1', '2']",
    "url(device.attributes['dra.example.com'].url).getHostname() == 'example.com'",
    "'abc 123'.find('[0-9]+') == '123'",
    "'abc 123'.find('[0-9]*') == ''",
    "'abc 123'.find('xyz') == ''",
    "'123 abc 456'.findAll('[0-9]+') == ['123', '456']",
    "'123 abc 456'.findAll('[0-9]+', 1) == ['123']",
    "'123 abc 456'.findAll('[0-9]*') == ['123', '', '', '', '456']",
    "'123 abc 456'.findAll('xyz') == []",
    "'abc 123 def 123'.findAll('123', 0) == []",
    "'baaac'.findAll('a*') == ['', 'aaa', '', '']",
    "'abc'.find('[') == ''",
    "'abc'.findAll('(') == []",
    "device.attributes['dra.example.com'].name.find('[0-9]+') == '7'",
    "'a1b2'.findAll('[a-z][0-9]', -1).size() == 2",
    "'日本語'.find('本.') == '本語'",
    '[1, 3].sum() == 4',
    '[1.0, 3.0].sum() == 4.0',
    "[duration('1m'), duration('1s')].sum() == duration('1m1s')",
    '[1u, 2u].sum() == 3u',
    '[9223372036854775807, 1].sum() == 0',
    '[1, 3].min() == 1',
    '[1, 3].max() == 3',
    '[1].min() == 1',
    "['b', 'a'].min() == 'a'",
    '[1, 2, 2, 3].indexOf(2) == 1',
    "['a', 'b', 'b', 'c'].lastIndexOf('b') == 2",
    '[1.0].indexOf(1.1) == -1',
    '[1, 2, 3].isSorted()',
    '[3, 2].isSorted() == false',
    "['a', 'b'].isSorted()",
    '[true, false].isSorted() == false',
    "[b'a', b'b'].isSorted()",
    '[2, 1].max() == 2 && [2.5, 1.5].min() == 1.5',
    '[[1], [2]].indexOf([2]) == 1',
    "[{'a': 1}].indexOf({'a': 1}) == 0",
    'sets.contains([1, 2, 3], [3, 1])',
    'sets.contains([1], [2]) == false',
    'sets.equivalent([1, 2], [2, 1, 1])',
    'sets.intersects([1, 2], [2, 3])',
    'sets.intersects([1], [2]) == false',
    'sets.contains([1.0], [1])',
    '[1, 2, 3, 4].slice(1, 3) == [2, 3]',
    '[1, [2, [3]]].flatten() == [1, 2, [3]]',
    '[1, [2, [3]]].flatten(2) == [1, 2, 3]',
    '[1, 2, 2, 3].distinct() == [1, 2, 3]',
    'lists.range(3) == [0, 1, 2]',
    '[3, 1, 2].sort() == [1, 2, 3]',
    '[3, 1, 2].reverse() == [2, 1, 3]',
    "[{'a': 2}, {'a': 1}].sortBy(e, e.a)[0].a == 1",
    "[1, 'b'].sort() == [1]",
    '[1, 2].slice(2, 1) == []',
    '[1, 2].flatten(-1) == []',
    "{'a': 1, 'b': 2}.all(k, v, v > 0)",
    '[10, 20].exists(i, v, i == 1 && v == 20)',
    '[1, 2, 1].existsOne(i, v, v == 2)',
    '[1, 2].transformList(i, v, v * 2) == [2, 4]',
    '[1, 2].transformList(i, v, i > 0, v) == [2]',
    "{'a': 1}.transformMap(k, v, v + 1) == {'a': 2}",
    "{'a': 1}.transformMapEntry(k, v, {k + 'x': v}) == {'ax': 1}",
    "'abc'.charAt(1) == 'b'",
    "'hello'.indexOf('l') == 2",
    "'hello'.lastIndexOf('l') == 3",
    "'TacoCat'.lowerAscii() == 'tacocat'",
    "'a-b-c'.replace('-', '+', 1) == 'a+b-c'",
    "'a,b,c'.split(',') == ['a', 'b', 'c']",
    "'tacocat'.substring(4) == 'cat'",
    "'  x  '.trim() == 'x'",
    "'x'.upperAscii() == 'X'",
    "['a', 'b'].join('-') == 'a-b'",
    'strings.quote(\'a"b\') == \'"a\\\\"b"\'',
    "'%s is %d years'.format(['x', 3]) == 'x is 3 years'",
    "'%.2f'.format([1.5]) == '1.50'",
    "'abc'.reverse() == 'cba'",
    "'%d'.format(['x']) == ''",
    "'%x'.format([255]) == 'ff'",
    "'%b'.format([5]) == '101'",
    'cel.bind(a, 1, a + 1 == 2)',
    '[1, 2][?5].orValue(0) == 0',
    'optional.of(1).hasValue()',
    "semver('1.2.3').isLessThan(semver('1.10.0'))",
    "semver('v1.2', true) == semver('1.2.0')",
    "isSemver('1.2')",
    "isSemver('v1.2', true)",
    "device.attributes['dra.example.com'].fw.major() == 1",
    "device.attributes['dra.example.com'].fw.compareTo(semver('1.9.0')) == 1",
    "quantity('1Gi').isGreaterThan(quantity('1G'))",
    "quantity('1.5').asApproximateFloat() == 1.5",
    "device.capacity['dra.example.com'].memory.compareTo(quantity('40Gi')) == 0",
    "format.dns1123Label().validate('Not A Label').hasValue()",
    "format.named('uuid').hasValue()",
    '1 < 1.5',
    '2u > 1',
    '1.5 >= 1u',
    '[1, 2.0].size() == 2',
    "{'a': 1, 'b': 'x'}.size() == 2",
    "[device.attributes['dra.example.com'].model, 'x'].size() == 2",
    "duration('1x') > duration('1s')",
    "timestamp('bad') < timestamp('2020-01-01T00:00:00Z')",
    "'a'.matches('[')",
    'math.greatest(1, 2) == 2',
    "base64.encode(b'a') == 'YQ=='",
    '[1, 2].first().value() == 1',
    'lists.range(2000).all(i, lists.range(2000).all(j, true))',
    'lists.range(100).all(i, lists.range(100).all(j, true))',
    "lists.range(10000000).size() > 0",
    "lists.range(1000001).size() > 0",
    "true || lists.range(2000000).size() > 0",
    "lists.range(device.attributes['dra.example.com'].numa).size() == 1",
    "device.attributes['dra.example.com'].model",
    'device.driver',
    "device.attributes['dra.example.com'].numa + 1",
]


def _oracle(work: Path, rows: list[dict]) -> list[dict]:
    (work / "oracle").mkdir(exist_ok=True)
    shutil.copy(Path(__file__).with_name("oracle.go.txt"), work / "oracle" / "main.go")
    (work / "oracle" / "go.mod").write_text(GO_MOD)
    env = {"GOFLAGS": "-mod=mod"}
    subprocess.run(["go", "mod", "tidy"], cwd=work / "oracle", check=True, env={**_env(), **env})
    subprocess.run(["go", "build", "-o", "oracle", "."], cwd=work / "oracle", check=True, env={**_env(), **env})
    stdin = "".join(json.dumps(r) + "\n" for r in rows)
    out = subprocess.run([str(work / "oracle" / "oracle")], input=stdin, capture_output=True, text=True, check=True)
    return [json.loads(line) for line in out.stdout.splitlines()]


def _env() -> dict[str, str]:
    import os
    return dict(os.environ)


def _kube_table(work: Path) -> list[dict]:
    pkg = work / "dra"
    shutil.copytree(DRA, pkg)
    for p in pkg.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    (pkg / "cel" / "zz_dump_test.go").write_text(DUMP_TEST)
    dump = work / "table.json"
    subprocess.run(["go", "test", "./cel/", "-run", "TestZZDump", "-count=1"], cwd=pkg, check=True,
                   env={**_env(), "GOFLAGS": "-mod=mod", "DUMP_TO": str(dump)})
    return sorted(json.loads(dump.read_text()), key=lambda r: r["name"])


def _library_exprs() -> list[str]:
    exprs = []
    for f in ("ip_test.go", "cidr_test.go"):
        for m in re.finditer(r"expr:\s+`([^`]*)`", (LIBRARY / f).read_text()):
            e = m.group(1)
            # kube's tests check values of every type; a selector must be bool, so non-bool ones are compared
            # with themselves (parsing, conversion and runtime errors still show)
            exprs.append(e if re.search(r"\b(is[A-Z]\w*|contains\w+|isCanonical)\(", e) and "==" not in e
                         else f"{e} == {e}")
    return exprs + EXTRA


def _compositions(exprs: list[str]) -> list[str]:
    """Pairs of library expressions joined by &&, ||, cel.bind and a list comprehension (seeded, so the table is
    reproducible): they exercise the checker's errors and the evaluation order on mixed libraries."""
    import random

    rng = random.Random(15)
    pool = [e for e in exprs if "lists.range(1" not in e and "lists.range(2" not in e]
    out = []
    for _ in range(100):
        a, b = rng.choice(pool), rng.choice(pool)
        out += [f"{a} && {b}", f"!({a}) || {b}", f"cel.bind(z, {a}, z == {b})", f"[{a}, {b}].exists(x, x)"]
    return out


def _na(row: dict) -> str:
    if row["env"] == "NewExpressions":
        return "NewExpressions environment: kube-apiserver validation only, kube-scheduler compiles stored expressions"
    if row["listTypes"]:
        return "DRAListTypeAttributes (alpha, off in 1.36): list-typed attributes not implemented"
    if not row["consumable"] and "allowMultipleAllocations" in row["expression"]:
        return "DRAConsumableCapacity off: kube-scheduler 1.36 runs with it on (beta), so the field always exists"
    return ""


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="cel-harvest-") as tmp:
        work = Path(tmp)
        table = _kube_table(work)
        kube_rows = []
        for r in table:
            row = {"name": r["name"], "expression": r["expression"]}
            for k in ("driver", "attributes", "capacity", "allowMultipleAllocations"):
                if r.get(k):
                    row[k] = r[k]
            if r["compileError"]:
                row["compileError"] = r["compileError"]
            elif r["matchError"]:
                row["matchError"] = r["matchError"]
            else:
                row["match"] = r["match"]
            if r["cost"]:
                row["cost"] = r["cost"]
            if _na(r):
                row["na"] = _na(r)
            kube_rows.append(row)
        exprs = _library_exprs()
        composed = _compositions(exprs)
        outcomes = _oracle(work, [{**DEVICE, "expr": e} for e in exprs + composed])
        library, compositions = [], []
        for e, o in zip(exprs + composed, outcomes, strict=True):
            row = {"expression": e}
            if o.get("compile"):
                row["compileError"] = o["compile"]
            elif o.get("runtime"):
                row["matchError"] = o["runtime"]
            else:
                row["match"] = o["match"]
            if o.get("cost") is not None:
                row["cost"] = o["cost"]
            if o.get("estimate") is not None:
                row["estimate"] = o["estimate"]
            (library if len(library) < len(exprs) else compositions).append(row)
    header = ("# Generated by hack/cel_tables/harvest.py. `kube`: kube's DRA CEL test table\n"
              "# (k8s.io/dynamic-resource-allocation v0.36.3 cel/compile_test.go) as data; `library`: Kubernetes CEL\n"
              "# library cases (apiserver v0.36.3 pkg/cel/library ip_test.go, cidr_test.go, library docs, cel-go\n"
              "# extensions of the base environment), `compositions` of them, each with the outcome kube's\n"
              "# compiler gives on `device`.\n"
              "# compileError/matchError: kube's text (substring for `kube`, whole for `library`); cost: kube's\n"
              "# actual runtime cost; estimate: kube-apiserver's compile-time estimate;\n"
              "# na: why a case does not apply to kube-scheduler 1.36 / ksched.\n")
    body = yaml.safe_dump({"device": DEVICE, "kube": kube_rows, "library": library, "compositions": compositions},
                          sort_keys=False,
                          allow_unicode=True, width=120)
    OUT.write_text(header + body)
    print(f"{OUT}: {len(kube_rows)} kube cases, {len(library)} library cases, {len(compositions)} compositions")


if __name__ == "__main__":
    main()

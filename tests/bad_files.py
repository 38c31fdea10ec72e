"""Bad files of four kinds (workloads, captures, catalogs, config JSON) for tests/test_bad_inputs.py, which writes
each into its folder of bad files and runs the command that reads it. Each case is one class of mistake made in a
good file of its kind: file name -> (the good file, what replaces what in it, a pattern of the one line)."""

from __future__ import annotations

from pathlib import Path

CORPUS = Path(__file__).parent / "corpus"

WORK = '''name = "mine"
systems = ["rocksdb"]
records = 2000
ladder = [0.5, 1.0]
[drivers.db_bench]
benchmarks = ["fillrandom", "readrandom"]
'''
SECTION = '[drivers.db_bench]\nbenchmarks = ["fillrandom", "readrandom"]'
WORKLOAD_FILES = {
    "records-text.toml": (WORK, "records = 2000", 'records = "many"', "records 'many' is not a whole number"),
    "records-fraction.toml": (WORK, "records = 2000", "records = 2000.5", "records 2000.5 is not a whole number"),
    "ladder-above-one.toml": (WORK, "ladder = [0.5, 1.0]", "ladder = [0.5, 1.5]",
                              r"ladder \[0.5, 1.5\]: 1.5 is above 1\. Fix: e.g. ladder = \[0.05"),
    "ladder-item-text.toml": (WORK, "ladder = [0.5, 1.0]", 'ladder = [0.5, "1.0"]',
                              "ladder .* is not a non-empty list of numbers"),
    "ladder-empty.toml": (WORK, "ladder = [0.5, 1.0]", "ladder = []", r"ladder \[\] is not a non-empty list"),
    "ladder-misspelt.toml": (WORK, "ladder =", "ladders =", "unknown field 'ladders' .did you mean 'ladder'"),
    "objective-near.toml": (WORK, "records = 2000", 'records = 2000\nobjective = "ops_per_sec"',
                            "objective 'ops_per_sec' is not an objective .did you mean 'ops_per_s'"),
    "description-number.toml": (WORK, "records = 2000", "records = 2000\ndescription = 5", "description 5 is not text"),
    "drivers-text.toml": (WORK, SECTION, 'drivers = "db_bench"', "drivers is not a table"),
    "driver-section-text.toml": (WORK, SECTION, '[drivers]\ndb_bench = "fillrandom"',
                                 "drivers.db_bench is not a table"),
    "drivers-empty.toml": (WORK, SECTION, "[drivers]", r"\[drivers\] has no driver section"),
    "counts-blank.toml": (WORK, "records = 2000", 'records = 2000\ncounts = " "', "counts ' ' is not text .not blank"),
    "operations-zero.toml": (WORK, "records = 2000", "records = 2000\noperations = 0", "operations 0 is below 1"),
    "name-long.toml": (WORK, 'name = "mine"', f'name = "{"x" * 65}"', "has 65 characters, more than 64"),
    "key-size-bool.toml": (WORK, "records = 2000", "records = 2000\nkey_size = true",
                           "key_size True is not a whole number"),
}

CAPTURE = (CORPUS / "captures" / "rocksdb-format-1" / "capture.toml").read_text()
CAPTURE_FILES = {  # each written as NAME/capture.toml, owner-only
    "system-misspelt.capture": (CAPTURE, '[capture]\nsystem = "rocksdb"', '[capture]\nsytem = "rocksdb"',
                                "unknown field 'capture.sytem' .did you mean 'system'"),
    "no-system.capture": (CAPTURE, '[capture]\nsystem = "rocksdb"\n', "[capture]\n", "no 'capture.system'"),
    "operations-text.capture": (CAPTURE, "operations = 2000", 'operations = "many"',
                                "capture.operations 'many' is not a whole number"),
    "span-negative.capture": (CAPTURE, "span_s = 1.25", "span_s = -1.25", "capture.span_s -1.25 is below 0"),
    "mix-number.capture": (CAPTURE, "mix = { get = 1500, put = 500 }", "mix = 5", "capture.mix is not a table"),
    "mix-count-text.capture": (CAPTURE, "get = 1500", 'get = "lots"', "capture.mix.get 'lots' is not a whole number"),
    "fingerprint-misspelt.capture": (CAPTURE, "fingerprints = []", 'fingerprints = [{ text = "get", cuont = 2 }]',
                                     r"unknown field 'capture.fingerprints #1.cuont' .did you mean 'count'"),
    "fingerprint-negative.capture": (CAPTURE, "fingerprints = []", 'fingerprints = [{ text = "get", count = -2 }]',
                                     "capture.fingerprints #1.count -2 is below 0"),
    "fingerprints-table.capture": (CAPTURE, "fingerprints = []", 'fingerprints = { text = "get" }',
                                   "capture.fingerprints is not a list of tables"),
    "files-not-sha.capture": (CAPTURE, 'trace = "9f86', 'trace = "xyz", old = "9f86',
                              "capture.files.trace 'xyz' is not a SHA-256"),
    "format-newer.capture": (CAPTURE, "[capture]\n", "[capture]\nformat = 9\n",
                             "capture.format 9 is newer than this knobtune reads .1 to 2.. Fix: tune it with"),
    "format-text.capture": (CAPTURE, "[capture]\n", '[capture]\nformat = "2"\n',
                            "capture.format '2' is not a whole number"),
    "notes-text.capture": (CAPTURE, 'notes = ["a trace records the seek, not the Next and Prev calls that follow it"]',
                           'notes = "none"', "capture.notes 'none' is not a list of lines. Fix: e.g. notes = "),
    "scans-text.capture": (CAPTURE, "fingerprints = []", 'fingerprints = []\nscans = { scans = "all" }',
                           "capture.scans.scans 'all' is not a whole number"),
}

CATALOG = (CORPUS / "catalogs" / "good-minimal.toml").read_text() + '''
[[relations]]
left = "limit"
op = "<="
right = "size"
factor = 1.0

[[implications]]
when = { mode = ["b"] }
then = { limit = 50 }
'''
CATALOG_FILES = {
    "catalog-system-number.toml": (CATALOG, 'system = "toy"', "system = 5", "system 5 is not text"),
    "catalog-formats-text.toml": (CATALOG, 'formats = ["flags"]', 'formats = "flags"',
                                  "formats 'flags' is not a list of names"),
    "catalog-type-misspelt.toml": (CATALOG, '[knobs.limit]\ntype = "int"', '[knobs.limit]\ntpye = "int"',
                                   "unknown field 'knobs.limit.tpye' .did you mean 'type'"),
    "catalog-log-text.toml": (CATALOG, "log = true", 'log = "yes"', "knobs.size.log 'yes' is not true or false"),
    "catalog-special-number.toml": (CATALOG, '-1 = "unlimited"', "-1 = 5", r"knobs.limit.special.-1 5 is not text"),
    "catalog-condition-misspelt.toml": (CATALOG, 'knob = "mode", values', 'knob = "mode", vaules',
                                        r"'knobs.limit.conditions #1.vaules' .did you mean 'values'"),
    "catalog-condition-values-text.toml": (CATALOG, 'values = ["b"]', 'values = "b"',
                                           r"knobs.limit.conditions #1.values 'b' is not a list of values"),
    "catalog-spell-format.toml": (CATALOG, "spell.flags", "spell.flag",
                                  "knobs.mode.spell.flag names a format the catalog's formats do not list.*"
                                  "did you mean 'flags'"),
    "catalog-names-format.toml": (CATALOG, "log = true", 'log = true\nnames.conf = "sz"',
                                  "knobs.size.names.conf names a format the catalog's formats do not list"),
    "catalog-relation-op.toml": (CATALOG, 'op = "<="', 'op = "=>"', r"relations #1.op '=>' is not a comparison"),
    "catalog-relation-factor.toml": (CATALOG, "factor = 1.0", "factor = 0", r"relations #1.factor 0 is not a positive"),
    "catalog-relation-knob.toml": (CATALOG, 'right = "size"', 'right = "sise"',
                                   r"relations #1.right 'sise' is not a numeric knob .* .did you mean 'size'"),
    "catalog-implication-misspelt.toml": (CATALOG, "then = {", "thne = {",
                                          r"unknown field 'implications #1.thne' .did you mean 'then'"),
    "catalog-implication-value.toml": (CATALOG, "then = { limit = 50 }", "then = { limit = 500 }",
                                       r"implications #1.then.limit 500 is out of range"),
    "catalog-memory-misspelt.toml": (CATALOG, "[memory]\nplanned", "[memory]\nplaned",
                                     "unknown field 'memory.planed' .did you mean 'planned'"),
    "catalog-memory-flat.toml": (CATALOG, 'planned = [["size", 2]]', 'planned = ["size", 2]',
                                 "memory.planned .* is not a list of non-empty lists of values"),
    "catalog-drivers-empty.toml": (CATALOG, 'drivers = ["patched"]', "drivers = []",
                                   "knobs.mode.drivers is an empty list"),
    "catalog-min-above-max.toml": (CATALOG, 'min = "1MiB"', 'min = "2GiB"', "knobs.size.min 2147483648 is above max"),
}

EXPORTED = ('{"written_by": "knobtune 0.4.0", "system": "rocksdb", "study": "old-release", "workload": "fillrandom", '
            '"config": {"block_size": 16384}, "verified": true, "verdict": "1.2x", "allow_unsafe": false, '
            '"allow_operational": false, "unsafe_knobs": {}, "left_out_unsafe": {"disable_wal": "durability"}, '
            '"warnings": [], "settled": true, "costs": {"default": {"workload_s": 1.5, "source": "one run"}}}')
BASELINE = ('{"written_by": "knobtune 0.4.0", "system": "rocksdb", "baseline": "rocksdb-guide", "profile": "", '
            '"machine": {"memory_bytes": 25276059648, "cpus": 2, "disk": "hdd", "connections": null}, '
            '"max_connections": 0, "config": {"block_size": 16384}, "notes": [], "source": {"page": "https://x"}}')
CONFIG_FILES = {
    "config-misspelt.json": (EXPORTED, '"config":', '"confg":', "unknown field 'confg' .did you mean 'config'"),
    "config-a-list.json": (EXPORTED, '"config": {"block_size": 16384}', '"config": [16384]', "config is not a table"),
    "config-verified-text.json": (EXPORTED, '"verified": true', '"verified": "yes"',
                                  "verified 'yes' is not true or false"),
    "config-system-number.json": (EXPORTED, '"system": "rocksdb"', '"system": 5', "system 5 is not text"),
    "config-warnings-text.json": (EXPORTED, '"warnings": []', '"warnings": "none"', "warnings 'none' is not a list"),
    "config-cost-number.json": (EXPORTED, '"default": {"workload_s": 1.5, "source": "one run"}', '"default": 1.5',
                                "costs.default is not a table"),
    "config-class-number.json": (EXPORTED, '"unsafe_knobs": {}', '"unsafe_knobs": {"disable_wal": 1}',
                                 "unsafe_knobs.disable_wal 1 is not text"),
    "config-left-out-list.json": (EXPORTED, '"left_out_unsafe": {"disable_wal": "durability"}',
                                  '"left_out_unsafe": ["disable_wal"]', "left_out_unsafe is not a table"),
    "config-top-list.json": (EXPORTED, EXPORTED, '[{"block_size": 16384}]', "holds no JSON object of knobs"),
    "baseline-machine-misspelt.json": (BASELINE, '"cpus": 2', '"cpu": 2',
                                       "unknown field 'machine.cpu' .did you mean 'cpus'"),
    "baseline-disk.json": (BASELINE, '"disk": "hdd"', '"disk": "nvme"', "machine.disk 'nvme' is not a disk type"),
    "baseline-memory-zero.json": (BASELINE, '"memory_bytes": 25276059648', '"memory_bytes": 0',
                                  "machine.memory_bytes 0 is below 1"),
    "baseline-other-system.json": (BASELINE, '"system": "rocksdb"', '"system": "postgresql"',
                                   "is a config of postgresql, not rocksdb"),
    "baseline-connections-negative.json": (BASELINE, '"max_connections": 0', '"max_connections": -1',
                                           "max_connections -1 is below 0"),
    "baseline-no-system.json": (BASELINE, '"system": "rocksdb", ', "", "no 'system'"),
}


def write_bad_files(folder: Path) -> None:
    """Each bad file of the four kinds into ``folder`` (a capture as an owner-only folder)."""
    for name, (base, old, new, _) in {**WORKLOAD_FILES, **CATALOG_FILES, **CONFIG_FILES}.items():
        assert old in base, name
        (folder / name).write_text(base.replace(old, new, 1))
    for name, (base, old, new, _) in CAPTURE_FILES.items():
        assert old in base, name
        (folder / name).mkdir(mode=0o700)
        (folder / name / "capture.toml").write_text(base.replace(old, new, 1))
        (folder / name / "capture.toml").chmod(0o600)


def cases() -> list[tuple[str, tuple[str, ...], str]]:
    """(id, the arguments, a pattern of the one line) for every bad file, read as a user reads it."""
    tune = ("--trials", "1")
    compare = ("compare", "rocksdb", "--workload", "fillrandom", "--config", "default", "--config")
    return [(f"file-workload-{name.removesuffix('.toml')}",
             ("tune", "rocksdb", "--workload", f"{{files}}/{name}", *tune), words)
            for name, (_, _, _, words) in WORKLOAD_FILES.items()] + [
        (f"file-capture-{name.removesuffix('.capture')}",
         ("tune", "rocksdb", "--workload", f"{{files}}/{name}", *tune), words)
        for name, (_, _, _, words) in CAPTURE_FILES.items()] + [
        (f"file-{name.removesuffix('.toml')}", ("knobs", f"{{files}}/{name}"), words)
        for name, (_, _, _, words) in CATALOG_FILES.items()] + [
        (f"file-{name.removesuffix('.json')}", (*compare, f"{{files}}/{name}"), words)
        for name, (_, _, _, words) in CONFIG_FILES.items()]


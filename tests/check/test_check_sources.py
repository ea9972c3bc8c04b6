"""The other ways in: a directory of pre-made files (JSON, gzip JSON, MSCCL XML), a command's
placeholders and bare output, optcoll's own registry, and instances a synthesizer does not apply to."""
import gzip
import json
import shlex
import shutil
import sys
from pathlib import Path

import pytest

from check_helpers import QUICK
from optcoll.check import run_check
from optcoll.machines.modelfile import load_machine_file
from optcoll.instances.suite import find_suite

RING = "ring8-allgather-c1"
RING_XML = Path(__file__).resolve().parents[1] / "interop" / "msccl" / "data" / "allgather_ring_8.xml"
STORED = QUICK / "schedules" / f"{RING}.json.gz"


def _by(report):
    return {o.instance: o for o in report.outcomes}


def test_a_directory_of_schedule_files(make_suite, tmp_path):
    names = ["plain", "zipped", "xml", "xml-problem", "absent", "twice", "broken"]
    suite = make_suite({name: RING for name in names})
    made = tmp_path / "made"
    made.mkdir()
    (made / "plain.json").write_bytes(gzip.decompress(STORED.read_bytes()))
    shutil.copy(STORED, made / "zipped.json.gz")
    shutil.copy(RING_XML, made / "xml.xml")
    # gpu 0 never copies its own chunk into its output buffer: the network schedule is still
    # valid, but the file does not do what optcoll's model of it does
    text = RING_XML.read_text()
    old = ('<step s="0" type="cpy" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" '
           'deps="-1" hasdep="0"/>\n      <step s="1" type="s" srcbuf="o" srcoff="0"')
    assert old in text
    (made / "xml-problem.xml").write_text(text.replace(old, old.replace('"cpy"', '"nop"').replace(
        'type="s" srcbuf="o"', 'type="s" srcbuf="i"'), 1))
    shutil.copy(STORED, made / "twice.json.gz")
    shutil.copy(RING_XML, made / "twice.xml")
    (made / "broken.json").write_text("[]")

    report = run_check(f"dir:{made}", suite, max_gap=2.0, jobs=2)
    by = _by(report)
    assert [by[n].status for n in names] == ["pass", "pass", "pass", "invalid", "missing",
                                             "malformed", "malformed"]
    assert by["plain"].ratio == pytest.approx(1.0) and by["plain"].source == str(made / "plain.json")
    # MSCCL's unidirectional ring takes 7 link times where the bidirectional optimum takes 4
    assert by["xml"].ratio == pytest.approx(7 / 4)
    assert by["xml-problem"].violation["kind"] == "msccl"
    assert by["xml-problem"].message == ("invalid schedule [msccl]: the MSCCL file does not run as "
                                         "optcoll's model of it: gpu 0 o[0] ends holding nothing; "
                                         "it must hold chunk 0")
    assert by["absent"].message == (f"no schedule file absent.json or absent.json.gz or absent.xml "
                                    f"in {made}")
    assert by["twice"].message == f"several schedule files in {made}: twice.json.gz, twice.xml; keep one"
    assert "not an optcoll schedule" in by["broken"].message and "broken.json" in by["broken"].message
    assert all(o.seconds is None for o in report.outcomes)


def test_a_command_gets_every_placeholder_and_may_write_bare_out(make_suite, tmp_path):
    """The probe records its arguments and writes the stored schedule, gzip-compressed, to bare
    {out}: the format is read from the content."""
    suite = make_suite({"probe": RING})
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import json, shutil, sys\n"
        "names = ['instance', 'out', 'machine', 'collective', 'size', 'chunks', 'name', 'seed']\n"
        "args = dict(zip(names, sys.argv[1:]))\n"
        f"json.dump(args, open({str(tmp_path / 'args.json')!r}, 'w'))\n"
        f"shutil.copy({str(STORED)!r}, args['out'])\n"
        f"shutil.copy(args['machine'], {str(tmp_path / 'machine.toml')!r})\n")
    template = " ".join([shlex.quote(sys.executable), shlex.quote(str(probe)), "{instance}", "{out}",
                         "{machine}", "{collective}", "{size}", "{chunks}", "{name}", "{seed}"])
    report = run_check(f"cmd:{template}", suite, jobs=1)
    assert report.passed, report.text()
    args = json.loads((tmp_path / "args.json").read_text())
    instance = find_suite(str(suite)).spec("probe").instance
    assert args["instance"] == str(suite / "probe.toml")
    assert (args["collective"], args["size"], args["chunks"], args["name"], args["seed"]) == \
        ("allgather", str(64 * 2**20), "1", "probe", "0")
    assert args["machine"].endswith("machine.toml")
    machine = load_machine_file(tmp_path / "machine.toml")
    assert machine.num_npus == instance.machine.num_npus
    assert (machine.link_src.tolist(), machine.link_dst.tolist()) == \
        (instance.machine.link_src.tolist(), instance.machine.link_dst.tolist())
    assert machine.link_bandwidth.tolist() == instance.machine.link_bandwidth.tolist()
    assert _by(report)["probe"].source == "schedule.json.gz written by the command"


def test_optcolls_own_synthesizers_and_instances_they_do_not_apply_to(make_suite):
    suite = make_suite({"a2a": "ring4-alltoall-c1", "ag": RING})
    report = run_check("builtin:tacos", suite, max_gap=2.0)
    assert report.passed and [o.status for o in report.outcomes] == ["pass", "pass"]

    mixed = run_check("pairwise", suite, max_gap=10.0)
    by = _by(mixed)
    assert by["a2a"].status == "pass"
    assert by["ag"].status == "skipped" and by["ag"].message.startswith(
        "not applicable: pairwise does not implement allgather")
    assert mixed.passed and "Skipped:\n  ag: not applicable" in mixed.text()

    only_ag = make_suite({"ag": RING}, name="only-ag")
    nothing = run_check("pairwise", only_ag, max_gap=10.0)
    assert not nothing.passed and not nothing.failures
    assert "every instance was skipped, nothing was checked" in nothing.headline()


def test_a_synthesizer_that_exits_the_interpreter_is_an_error_not_a_lost_worker(make_suite, tmp_path):
    (tmp_path / "quitter.py").write_text("import sys\ndef run(instance):\n    sys.exit(3)\n")
    report = run_check(f"py:{tmp_path / 'quitter.py'}:run", make_suite({"good": RING}))
    (outcome,) = report.outcomes
    assert (outcome.status, outcome.message) == ("error", "the synthesizer raised SystemExit: 3")


def test_a_synthesizer_that_ignores_the_interrupt_is_killed_and_the_rest_go_on(make_suite, tmp_path,
                                                                                monkeypatch):
    import optcoll.check.run as run

    from optcoll.sweeps import pool

    monkeypatch.setattr(pool, "USER_CODE_GRACE", pool.Grace(1.5, 0.5))  # the parent's deadline: 1.5 × 0.5 s + 0.5 s
    (tmp_path / "stubborn.py").write_text(
        "import signal, time, sys\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "import chaos\n"
        "def run(instance):\n"
        "    if instance.name == 'stubborn':\n"
        "        signal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
        "        time.sleep(60)\n"
        "    return chaos.synthesize(instance)\n")
    report = run_check(f"py:{tmp_path / 'stubborn.py'}:run",
                       make_suite({"stubborn": RING, "good": RING}), timeout=0.5, jobs=2)
    by = _by(report)
    assert by["good"].status == "pass"
    assert by["stubborn"].status == "timeout"
    assert by["stubborn"].message.startswith(
        "no schedule within the time limit of 500 ms: the synthesizer did not respond to the "
        "interrupt, so its worker process was killed (exceeded its hard time limit of 1.25 s")


def test_a_synthesizer_that_scribbles_on_its_instance_is_verified_against_the_real_one(
        make_suite, tmp_path):
    """It drops a delivery and rewrites the postcondition it was handed to need nothing."""
    (tmp_path / "scribbler.py").write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "import chaos\n"
        "def run(instance):\n"
        "    pre, post = instance.collective.pre, instance.collective.post\n"
        "    for c in range(post.num_chunks):\n"
        "        post.nodes[post.indptr[c]:post.indptr[c + 1]] = pre.of(c)[0]\n"
        "    return chaos.synthesize(instance)\n")
    (outcome,) = run_check(f"py:{tmp_path / 'scribbler.py'}:run", make_suite({"missing": RING})).outcomes
    assert outcome.status == "invalid" and outcome.violation["kind"] == "postcondition"

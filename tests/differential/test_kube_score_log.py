"""kube-scheduler's -v=10 score lines are read back per pod and per scoring attempt (oracle.parse_kube_scores)."""

from __future__ import annotations

from .oracle import Comparison, Decision, compare, parse_kube_scores

LINES = [
    'I1125 12:00:00.000001   77 schedule_one.go:982] "Plugin scored node for pod" pod="diff/p000" '
    'plugin="NodeResourcesFit" node="s1-n0" score=77',
    'I1125 12:00:00.000002   77 schedule_one.go:982] "Plugin scored node for pod" pod="diff/p000" '
    'plugin="TaintToleration" node="s1-n0" score=300',
    'I1125 12:00:00.000003   77 schedule_one.go:982] "Plugin scored node for pod" pod="diff/p000" '
    'plugin="NodeResourcesFit" node="s1-n1" score=12',
    'I1125 12:00:00.000004   77 schedule_one.go:1050] "Calculated node\'s final score for pod" pod="diff/p000" '
    'node="s1-n0" score=377',
    'I1125 12:00:00.000005   77 round_trippers.go:1] "Response" verb="GET" status="200 OK"',
    # a second attempt of the same pod starts a new table
    'I1125 12:00:01.000001   77 schedule_one.go:982] "Plugin scored node for pod" pod="diff/p000" '
    'plugin="NodeResourcesFit" node="s1-n1" score=50',
]


def test_scores_grouped_per_pod_and_attempt() -> None:
    got = parse_kube_scores(LINES)
    assert got == {"diff/p000": [{"s1-n0": {"NodeResourcesFit": 77, "TaintToleration": 300},
                                  "s1-n1": {"NodeResourcesFit": 12}},
                                 {"s1-n1": {"NodeResourcesFit": 50}}]}


def test_a_differing_score_is_a_disagreement_naming_node_and_plugin() -> None:
    kube = [Decision("p", "a", scores={"a": {"X": 10}, "b": {"X": 5}})]
    ours = [Decision("p", "a", tied=["a"], scores={"a": {"X": 10}, "b": {"X": 6}})]
    cmp: Comparison = compare(1, kube, ours)
    assert cmp.counts["scores"] == [0, 1] and cmp.counts["feasible"] == [1, 0]
    assert cmp.disagreements[0]["detail"] == ["b X kube=5 ksched=6"]
    ours[0].scores = {"a": {"X": 10}}
    cmp = compare(1, kube, ours)
    assert cmp.counts["feasible"] == [0, 1]


def test_victims_are_read_from_the_preemption_log(tmp_path) -> None:
    from .oracle import PreemptionLog

    log = tmp_path / "kube-scheduler.log"
    log.write_text('I1 executor.go:251] "Start the preemption asynchronously" preemptor="diff/p9" node="n1" '
                   'numVictims=2\nI1 executor.go:152] "Preemptor Pod preempted victim Pod" preemptor="diff/p9" '
                   'victim="diff/b1" node="n1"\nI1 executor.go:152] "Preemptor Pod preempted vic')
    pl = PreemptionLog()
    pl.read(log)
    assert pl.victims == {"diff/p9": {"diff/b1"}} and not pl.done
    with open(log, "a") as f:  # the rest of a half-written line, then the end
        f.write('tim Pod" preemptor="diff/p9" victim="diff/b2" node="n1"\n'
                'I1 executor.go:303] "Async Preemption finished completely" preemptor="diff/p9" node="n1" '
                'result="success"\n')
    pl.read(log)
    assert pl.victims == {"diff/p9": {"diff/b1", "diff/b2"}} and pl.done == {"diff/p9"}

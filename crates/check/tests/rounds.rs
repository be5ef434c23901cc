//! A distributed exhaustive check in rounds among parties
//! (`tlbkit_check::run::rounds`), run here without a cluster: each round the
//! frontier split among parties that keep their visited sets between rounds,
//! each run for a budget of executions, what they hand back merged and passed
//! on to the others. It must end with the verdict and the states of the check
//! on one machine whatever the parties and budgets, survive a party lost
//! mid-round, and find a violation one machine finds.

use tlbkit_check::run::rounds::{round_report, Party, Rounds};
use tlbkit_check::{CheckSpec, Mode};

use crate::common;

/// Runs `spec` in rounds among `parties` parties of `budget` executions a
/// round; in round `lose` (if any) the first party's round is lost with it
/// and a new party takes its place. Returns the report (with the
/// counterexample of the violation a party found, if one did), and the
/// rounds run.
fn in_rounds(
    spec: &CheckSpec,
    parties: usize,
    budget: u64,
    lose: Option<usize>,
) -> (Option<tlbkit_check::CheckReport>, usize) {
    let driver = Rounds::start(spec.clone()).unwrap();
    let mut party: Vec<Party> = (0..parties).map(|_| Party::new(spec.clone(), &driver.visited()).unwrap()).collect();
    // What each party has not yet taken in of the others' rounds.
    let mut news: Vec<Vec<Vec<u8>>> = vec![Vec::new(); parties];
    let mut rounds = 0;
    loop {
        let (frontier, _, _) = driver.progress();
        if frontier == 0 {
            let r = driver.report(parties).unwrap();
            // The binary's --ray makes the report from the driver's save.
            let saved = round_report(spec, &driver.save(), parties, None).unwrap();
            assert_eq!((saved.explored.states, saved.explored.executions), (r.explored.states, r.explored.executions));
            return (Some(r), rounds);
        }
        rounds += 1;
        let mut back = Vec::new();
        for (i, part) in driver.split(parties).into_iter().enumerate() {
            let taken: Vec<&[u8]> = news[i].iter().map(Vec::as_slice).collect();
            let (body, found, _) = party[i].run(&part, &taken, budget, 1).unwrap();
            news[i].clear();
            if let Some(token) = found {
                let r = driver.report_found(&token, parties).unwrap();
                // The binary's --ray makes it from the driver's save and the token.
                let saved = round_report(spec, &driver.save(), parties, Some(&token)).unwrap();
                assert_eq!(saved.counterexample, r.counterexample);
                return (Some(r), rounds);
            }
            if lose == Some(rounds) && i == 0 {
                // Lost with its process: its part goes back as it was.
                driver.merge(&part).unwrap();
                back.push(None);
            } else {
                driver.merge(&body).unwrap();
                back.push(Some(body));
            }
        }
        for (i, body) in back.iter().enumerate() {
            for (j, n) in news.iter_mut().enumerate() {
                if let Some(b) = body.as_ref().filter(|_| j != i) {
                    n.push(b.clone());
                }
            }
        }
        if back[0].is_none() {
            party[0] = Party::new(spec.clone(), &driver.visited()).unwrap();
            news[0].clear();
        }
    }
}

#[test]
fn rounds_reach_the_states_of_one_machine() {
    for policy in ["arm64-linux", "x86-linux-pcid", "x86-freebsd-gen"] {
        let spec = common::small_spec(policy, 1, 3);
        let local = tlbkit_check::run::check_exhaustive_jobs(&spec, 1).unwrap();
        assert!(local.explored.complete && local.counterexample.is_none());
        for (parties, budget, lose) in [(3, 400, None), (2, 150, Some(2))] {
            let (dist, rounds) = in_rounds(&spec, parties, budget, lose);
            let dist = dist.expect("a report");
            assert!(dist.counterexample.is_none(), "{policy}");
            assert!(rounds > 2, "{policy}: the search should take several rounds ({rounds})");
            assert!(dist.explored.complete, "{policy}");
            assert_eq!(
                dist.explored.states, local.explored.states,
                "{policy}, {parties} parties, a party lost: {lose:?}"
            );
        }
    }
}

#[test]
fn a_party_that_finds_a_violation_hands_back_its_execution_shrunk_by_the_driver() {
    let spec =
        CheckSpec { mode: Mode::Exhaustive, iterations: u64::MAX, ..common::zoo_spec("linux-arm64-a8ffaaa060b8") };
    let one = tlbkit_check::run::check_exhaustive_jobs(&spec, 1).unwrap().counterexample.expect("one machine finds it");
    let (report, _) = in_rounds(&spec, 2, 300, None);
    let c = report.expect("a report").counterexample.expect("the rounds missed the violation one machine finds");
    // The same violation, shrunk as one machine's is; its token replays it.
    assert_eq!(c.property, one.property);
    let again = tlbkit_check::replay(&c.token).unwrap().counterexample.expect("the token replays the violation");
    assert_eq!(again.property, c.property);
}

#[test]
fn a_party_hands_back_only_what_it_changed() {
    // Two rounds of one party: the second hands back the states it added
    // and those it narrowed, not the whole visited set it holds.
    let spec = common::small_spec("arm64-linux", 1, 3);
    let driver = Rounds::start(spec.clone()).unwrap();
    let party = Party::new(spec.clone(), &driver.visited()).unwrap();
    let (mut held, mut states) = (Vec::new(), Vec::new());
    for _ in 0..2 {
        let part = driver.split(1).pop().unwrap();
        let (body, _, ran) = party.run(&part, &[], 200, 1).unwrap();
        assert!(ran > 0 && ran <= 200, "{ran} executions in a round of 200");
        held.push(round_report(&spec, &body, 1, None).unwrap().explored.states);
        driver.merge(&body).unwrap();
        states.push(driver.progress().1);
    }
    assert_eq!(held[0], states[0], "the first round hands back every state it visited");
    let added = states[1] - states[0];
    assert!(added > 0, "the second round found no new state: {states:?}");
    assert!(
        held[1] >= added && held[1] < states[1],
        "round 2 handed back {} states, added {added}, of {}",
        held[1],
        states[1]
    );
}

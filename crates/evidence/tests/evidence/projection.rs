//! Projection: cursor, idempotency key, duplicates, conflicts, convergence.

use std::sync::Arc;

use warden_contracts::*;
use warden_evidence::*;

use crate::support::*;
use crate::tamper;

fn targets(dir: &std::path::Path) -> Vec<(&'static str, Box<dyn ProjectionTarget>)> {
    vec![
        ("memory", Box::new(MemoryProjection::new())),
        (
            "sqlite",
            Box::new(SqliteProjection::open(dir.join("projection.db")).unwrap()),
        ),
    ]
}

#[test]
fn projection_converges_and_duplicates_are_no_ops() {
    let dir = tempfile::tempdir().unwrap();
    for b in Backend::all() {
        for (name, mut target) in targets(dir.path()) {
            block_on(async {
                let chain = ChainId::new(format!("proj-{}-{name}", b.name())).unwrap();
                let rec = standard_chain(b.store(), chain.as_str()).await;
                let records = rec.records().await.unwrap();
                let small = Projector { batch: 7 };
                let report = small
                    .drain(b.store().as_ref(), target.as_mut(), &chain)
                    .await
                    .unwrap();
                assert_eq!(report.applied, records.len() as u64, "{name}");
                assert_eq!(
                    target.cursor(&chain).unwrap(),
                    Some(head_of(records.last().unwrap()))
                );
                // Draining again finds nothing new.
                let again = small
                    .drain(b.store().as_ref(), target.as_mut(), &chain)
                    .await
                    .unwrap();
                assert_eq!(again, ProjectionReport::default());
                // A duplicate delivery (the synchronous stage-14 path, or a second projector) is
                // a no-op after its digest matches.
                let dup = target.apply(&chain, &records[3..9], false).unwrap();
                assert_eq!((dup.applied, dup.duplicates), (0, 6));
                let (runs, attempts) = project_from_scratch(&records);
                let mine_runs: Vec<_> = target
                    .runs()
                    .unwrap()
                    .into_iter()
                    .filter(|r| r.chain_id == chain)
                    .collect();
                let mine_attempts: Vec<_> = target
                    .attempts()
                    .unwrap()
                    .into_iter()
                    .filter(|a| a.chain_id == chain)
                    .collect();
                assert_eq!(mine_runs, runs, "{name}");
                assert_eq!(mine_attempts, attempts, "{name}");
                let run = &runs[0];
                assert_eq!(
                    (
                        run.state,
                        run.operations,
                        run.open_operations,
                        run.exceptions
                    ),
                    (RunState::Closed, 8, 0, 1)
                );
                let state = |op: &str| {
                    attempts
                        .iter()
                        .find(|a| a.operation_id.as_str() == op)
                        .unwrap()
                        .state
                };
                assert_eq!(state("op-ok"), AttemptState::Completed);
                assert_eq!(state("op-deny"), AttemptState::Denied);
                assert_eq!(state("op-esc"), AttemptState::Escalated);
                assert_eq!(state("op-ambiguous"), AttemptState::Ambiguous);
                let ok = attempts
                    .iter()
                    .find(|a| a.operation_id.as_str() == "op-ok")
                    .unwrap();
                assert_eq!((ok.gates, ok.denies, ok.call_executed), (2, 1, Some(true)));
            });
        }
    }
}

#[test]
fn a_conflicting_digest_fails_closed_and_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    for (name, mut target) in targets(dir.path()) {
        let store = Arc::new(MemoryStore::new());
        let chain = ChainId::new("conflict").unwrap();
        block_on(async {
            let rec = standard_chain(store.clone(), "conflict").await;
            let records = rec.records().await.unwrap();
            Projector::default()
                .drain(store.as_ref(), target.as_mut(), &chain)
                .await
                .unwrap();
            let before = (target.runs().unwrap(), target.attempts().unwrap());
            // The same record id offered with another digest.
            let mut forged = records[5].clone();
            forged.created_at = Timestamp(1);
            reseal(&mut forged);
            let batch = vec![records[4].clone(), forged.clone()];
            match target.apply(&chain, &batch, false) {
                Err(ProjectionError::Conflict {
                    record_id,
                    stored,
                    offered,
                    ..
                }) => {
                    assert_eq!(record_id, records[5].record_id);
                    assert_eq!(stored, records[5].chain_hash.to_string());
                    assert_eq!(offered, forged.chain_hash.to_string());
                }
                other => panic!("{name}: {other:?}"),
            }
            assert_eq!(
                (target.runs().unwrap(), target.attempts().unwrap()),
                before,
                "{name}: nothing applied"
            );
            let conflicts = target.conflicts().unwrap();
            assert_eq!(conflicts.len(), 1, "{name}");
            assert_eq!(conflicts[0].1, records[5].record_id);
        });
    }
}

#[test]
fn a_rewritten_source_is_a_conflict_for_the_projector() {
    let (dir, path, records) = tamper::pristine("rewrite");
    let chain = ChainId::new("rewrite").unwrap();
    let mut target = SqliteProjection::open(dir.path().join("p.db")).unwrap();
    block_on(async {
        let store = SqliteStore::open(&path).unwrap();
        Projector::default()
            .drain(&store, &mut target, &chain)
            .await
            .unwrap();
    });
    // Rewrite the last record under the cursor (consistently hashed).
    let db = tamper::raw(&path);
    let last = records.last().unwrap();
    let mut forged = last.clone();
    forged.created_at = Timestamp(2);
    reseal(&mut forged);
    db.execute(
        "DELETE FROM records WHERE sequence = ?1",
        [last.sequence as i64],
    )
    .unwrap();
    tamper::insert(&db, &forged);
    drop(db);
    block_on(async {
        let store = SqliteStore::open(&path).unwrap();
        let err = Projector::default()
            .drain(&store, &mut target, &chain)
            .await
            .unwrap_err();
        assert!(matches!(err, ProjectionError::Conflict { .. }), "{err}");
    });
}

#[test]
fn the_projection_store_lives_beside_the_evidence() {
    // Same file as the evidence: its tables are part of the schema.
    let b = Backend::sqlite();
    let path = b.path().unwrap();
    block_on(async {
        standard_chain(b.store(), "beside").await;
        let mut target = SqliteProjection::open(&path).unwrap();
        let r = Projector::default()
            .drain_all(b.store().as_ref(), &mut target)
            .await
            .unwrap();
        assert!(r.applied > 30);
        assert_eq!(target.runs().unwrap().len(), 1);
    });
}

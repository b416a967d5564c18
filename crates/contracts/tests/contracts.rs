//! Contract tests: every public value type round-trips through serde, matches its published JSON
//! Schema, and rejects unknown fields naming them; canonical JSON and digests are stable.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, HashMap};
use std::fmt::Debug;
use std::sync::OnceLock;

use proptest::prelude::*;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};
use warden_contracts::canonical::{
    MAX_SAFE_INTEGER, OfError, to_canonical_string, to_canonical_string_of,
};
use warden_contracts::*;

/// Bounded cases under CI, more locally.
fn config() -> ProptestConfig {
    let cases = if std::env::var_os("CI").is_some() {
        48
    } else {
        256
    };
    ProptestConfig::with_cases(cases)
}

fn validators() -> &'static HashMap<&'static str, jsonschema::Validator> {
    static V: OnceLock<HashMap<&'static str, jsonschema::Validator>> = OnceLock::new();
    V.get_or_init(|| {
        warden_contracts::schema::all()
            .into_iter()
            .map(|s| {
                let value = serde_json::to_value(&s.schema).unwrap();
                let validator = jsonschema::validator_for(&value)
                    .unwrap_or_else(|e| panic!("schema {} does not compile: {e}", s.name));
                (s.name, validator)
            })
            .collect()
    })
}

/// Serializes `value`, checks it against the schema named `schema`, deserializes it back and
/// checks equality and digest stability; then plants an unknown field (for object forms) and
/// checks the error names it.
fn check<T>(schema: &str, value: &T)
where
    T: Serialize + DeserializeOwned + PartialEq + Debug,
{
    let json = serde_json::to_value(value).unwrap();
    let validator = validators()
        .get(schema)
        .unwrap_or_else(|| panic!("no published schema named {schema}"));
    if let Err(e) = validator.validate(&json) {
        panic!("{schema}: {json} does not match its schema: {e}");
    }
    let text = serde_json::to_string(value).unwrap();
    let back: T = serde_json::from_str(&text).unwrap();
    assert_eq!(&back, value, "{schema} did not round-trip through {text}");
    assert_eq!(
        Digest::of_serialize(&back).unwrap(),
        Digest::of_serialize(value).unwrap()
    );
    if let Value::Object(mut map) = json {
        map.insert("zz_unknown".into(), json!(1));
        let err = serde_json::from_value::<T>(Value::Object(map)).unwrap_err();
        assert!(
            err.to_string().contains("unknown field `zz_unknown`"),
            "{schema}: unknown field not named: {err}"
        );
    }
}

// ---------------------------------------------------------------- strategies

fn id_text() -> impl Strategy<Value = String> {
    "[A-Za-z0-9_.:-]{1,20}"
}

macro_rules! id_strategy {
    ($f:ident, $t:ty) => {
        fn $f() -> impl Strategy<Value = $t> {
            id_text().prop_map(|s| <$t>::new(s).unwrap())
        }
    };
}
id_strategy!(request_id, RequestId);
id_strategy!(context_id, ContextId);
id_strategy!(scope_id, ScopeId);
id_strategy!(run_id, RunId);
id_strategy!(attempt_id, AttemptId);
id_strategy!(session_id, SessionId);
id_strategy!(principal_id, PrincipalId);
id_strategy!(tenant_id, TenantId);
id_strategy!(approval_id, ApprovalId);
id_strategy!(operation_id, OperationId);
id_strategy!(chain_id, ChainId);
id_strategy!(record_id, RecordId);

fn action_name() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9_]{0,10}(__[a-z0-9_]{1,8})?"
}

fn text() -> impl Strategy<Value = String> {
    "\\PC{0,24}"
}

fn timestamp() -> impl Strategy<Value = Timestamp> {
    (0u64..=MAX_SAFE_INTEGER).prop_map(Timestamp)
}

fn digest() -> impl Strategy<Value = Digest> {
    proptest::collection::vec(any::<u8>(), 0..16).prop_map(|b| Digest::of_bytes(&b))
}

/// Arbitrary JSON within I-JSON: safe integers and finite floats.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-(MAX_SAFE_INTEGER as i64)..=MAX_SAFE_INTEGER as i64).prop_map(|i| json!(i)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::btree_map(text(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn json_object() -> impl Strategy<Value = Map<String, Value>> {
    proptest::collection::btree_map("[a-z_]{1,8}", json_value(), 0..5)
        .prop_map(|m| m.into_iter().collect())
}

fn opt_bool() -> impl Strategy<Value = Option<bool>> {
    proptest::option::of(any::<bool>())
}

fn hints() -> impl Strategy<Value = Hints> {
    (opt_bool(), opt_bool(), opt_bool(), opt_bool()).prop_map(|(r, d, i, o)| Hints {
        read_only: r,
        destructive: d,
        idempotent: i,
        open_world: o,
    })
}

fn action_ref() -> impl Strategy<Value = ActionRef> {
    (action_name(), proptest::option::of("[0-9]\\.[0-9]")).prop_map(|(n, v)| {
        let r = ActionRef::new(n).unwrap();
        match v {
            Some(v) => r.with_version(v).unwrap(),
            None => r,
        }
    })
}

fn action_source() -> impl Strategy<Value = ActionSource> {
    prop_oneof![
        Just(ActionSource::Builtin {}),
        text().prop_map(|plugin| ActionSource::Plugin { plugin }),
        text().prop_map(|server| ActionSource::Mcp { server }),
    ]
}

fn descriptor() -> impl Strategy<Value = ActionDescriptor> {
    (
        action_name(),
        proptest::collection::btree_set("[A-Z][a-z]{1,6}", 0..3),
        "[0-9]\\.[0-9]",
        action_source(),
        hints(),
        json_object(),
        text(),
    )
        .prop_map(
            |(name, aliases, version, source, hints, schema, description)| {
                ActionDescriptor::new(name, version, source)
                    .unwrap()
                    .with_aliases(aliases)
                    .unwrap()
                    .with_hints(hints)
                    .with_input_schema(Value::Object(schema))
                    .unwrap()
                    .with_description(description)
            },
        )
}

fn scope() -> impl Strategy<Value = ExecutionScopeRef> {
    prop_oneof![
        scope_id().prop_map(|scope_id| ExecutionScopeRef::Ephemeral { scope_id }),
        (run_id(), proptest::option::of(attempt_id())).prop_map(|(run_id, owner_attempt_id)| {
            ExecutionScopeRef::DurableRun {
                run_id,
                owner_attempt_id,
            }
        }),
    ]
}

fn principal() -> impl Strategy<Value = PrincipalRef> {
    (
        principal_id(),
        prop_oneof![
            Just(PrincipalKind::User),
            Just(PrincipalKind::Service),
            Just(PrincipalKind::Agent),
            Just(PrincipalKind::Local),
            Just(PrincipalKind::Anonymous),
        ],
    )
        .prop_map(|(id, kind)| PrincipalRef { id, kind })
}

fn policy_ref() -> impl Strategy<Value = PolicySnapshotRef> {
    (text(), text(), digest()).prop_map(|(policy_id, version, digest)| PolicySnapshotRef {
        policy_id,
        version,
        digest,
    })
}

fn backend_ref() -> impl Strategy<Value = BackendRef> {
    (action_name(), proptest::option::of(digest())).prop_map(|(n, d)| {
        let b = BackendRef::new(n).unwrap();
        match d {
            Some(d) => b.with_capability_digest(d),
            None => b,
        }
    })
}

fn evidence_ref() -> impl Strategy<Value = EvidenceRef> {
    (chain_id(), record_id(), digest()).prop_map(|(chain_id, record_id, chain_hash)| EvidenceRef {
        chain_id,
        record_id,
        chain_hash,
    })
}

fn evidence_refs() -> impl Strategy<Value = Vec<EvidenceRef>> {
    proptest::collection::vec(evidence_ref(), 0..3)
}

fn request() -> impl Strategy<Value = ExecutionRequest> {
    (
        request_id(),
        action_ref(),
        json_object(),
        scope(),
        proptest::option::of(principal()),
        proptest::option::of(session_id()),
        proptest::option::of(timestamp()),
        proptest::option::of("[a-z0-9]{1,16}"),
        json_object(),
    )
        .prop_map(
            |(id, action, args, scope, claim, session, deadline, key, meta)| {
                let mut r = ExecutionRequest::new(id, action, Value::Object(args), scope)
                    .unwrap()
                    .with_metadata(meta);
                if let Some(c) = claim {
                    r = r.with_principal_claim(c);
                }
                if let Some(s) = session {
                    r = r.with_session(s);
                }
                if let Some(d) = deadline {
                    r = r.with_deadline(d);
                }
                if let Some(k) = key {
                    r = r.with_idempotency_key(k).unwrap();
                }
                r
            },
        )
}

fn context() -> impl Strategy<Value = ExecutionContext> {
    (
        context_id(),
        scope(),
        principal(),
        backend_ref(),
        proptest::option::of(tenant_id()),
        proptest::option::of(policy_ref()),
        evidence_refs(),
    )
        .prop_map(|(id, scope, who, backend, tenant, policy, evidence)| {
            let mut c = ExecutionContext::new(id, scope, who, backend)
                .with_authentication_evidence(evidence);
            if let Some(t) = tenant {
                c = c.with_tenant(TenantRef { id: t });
            }
            if let Some(p) = policy {
                c = c.with_policy_snapshot(p);
            }
            c
        })
}

const REASON_CODES: [ReasonCode; 19] = [
    ReasonCode::PolicyRule,
    ReasonCode::PolicyDefault,
    ReasonCode::Permission,
    ReasonCode::Unparseable,
    ReasonCode::UnknownProgram,
    ReasonCode::GateDenied,
    ReasonCode::Guard,
    ReasonCode::Precondition,
    ReasonCode::InvalidArguments,
    ReasonCode::UnknownAction,
    ReasonCode::ContextMismatch,
    ReasonCode::Containment,
    ReasonCode::Capacity,
    ReasonCode::Approved,
    ReasonCode::ApprovalRefused,
    ReasonCode::Mode,
    ReasonCode::EvaluatorFailed,
    ReasonCode::Transform,
    ReasonCode::Evidence,
];

fn reason() -> impl Strategy<Value = DecisionReason> {
    (
        proptest::sample::select(REASON_CODES.to_vec()),
        text(),
        proptest::option::of(text()),
        proptest::option::of(text()),
        proptest::option::of(text()),
    )
        .prop_map(|(code, message, rule, source, subject)| DecisionReason {
            code,
            message,
            rule,
            source,
            subject,
        })
}

fn approval_request() -> impl Strategy<Value = ApprovalRequest> {
    (
        approval_id(),
        request_id(),
        action_name(),
        digest(),
        proptest::option::of(digest()),
        text(),
        reason(),
        proptest::option::of(timestamp()),
    )
        .prop_map(
            |(
                approval_id,
                request_id,
                action,
                arguments_digest,
                policy_digest,
                authority,
                reason,
                expires_at,
            )| {
                ApprovalRequest {
                    approval_id,
                    request_id,
                    action,
                    arguments_digest,
                    policy_digest,
                    authority,
                    reason,
                    expires_at,
                }
            },
        )
}

fn approval_receipt() -> impl Strategy<Value = ApprovalReceipt> {
    (
        approval_id(),
        action_name(),
        digest(),
        proptest::option::of(digest()),
        principal(),
        0u64..1_000_000,
        1u64..1_000_000,
    )
        .prop_map(|(id, action, args, policy, who, issued, ttl)| {
            ApprovalReceipt::new(
                id,
                action,
                args,
                policy,
                who,
                Timestamp(issued),
                Timestamp(issued + ttl),
            )
            .unwrap()
        })
}

fn decision() -> impl Strategy<Value = AdmissionDecision> {
    (
        0u8..4,
        reason(),
        "[a-z_]{1,12}",
        evidence_refs(),
        proptest::option::of(timestamp()),
        approval_request(),
    )
        .prop_map(|(kind, reason, evaluator, evidence, retry, approval)| {
            let d = match kind {
                0 => AdmissionDecision::new(Disposition::Allow, reason, evaluator),
                1 => AdmissionDecision::new(Disposition::Deny, reason, evaluator),
                2 => AdmissionDecision::defer(reason, evaluator, retry),
                _ => AdmissionDecision::escalate(reason, evaluator, approval),
            };
            d.unwrap().with_evidence(evidence)
        })
}

fn profile() -> impl Strategy<Value = RuntimeProfile> {
    prop_oneof![
        Just(RuntimeProfile::Minimal),
        Just(RuntimeProfile::Durable),
        Just(RuntimeProfile::Governed),
        Just(RuntimeProfile::Certifiable),
    ]
}

fn failure() -> impl Strategy<Value = Failure> {
    ("[a-z_]{1,12}", text()).prop_map(|(kind, message)| Failure { kind, message })
}

fn outcome() -> impl Strategy<Value = ExecutionOutcome> {
    prop_oneof![
        (
            request_id(),
            profile(),
            json_value(),
            evidence_refs(),
            degradations()
        )
            .prop_map(|(request_id, profile, result, evidence, degradations)| {
                ExecutionOutcome::Succeeded {
                    request_id,
                    profile,
                    result,
                    evidence,
                    degradations,
                }
            }),
        (
            request_id(),
            profile(),
            reason(),
            "[a-z_]{1,8}",
            any::<bool>(),
            evidence_refs()
        )
            .prop_map(|(request_id, profile, reason, evaluator, stop, evidence)| {
                ExecutionOutcome::Denied {
                    request_id,
                    profile,
                    reason,
                    evaluator,
                    stop,
                    evidence,
                }
            }),
        (
            request_id(),
            profile(),
            reason(),
            proptest::option::of(timestamp())
        )
            .prop_map(|(request_id, profile, reason, retry_at)| {
                ExecutionOutcome::Deferred {
                    request_id,
                    profile,
                    reason,
                    retry_at,
                }
            }),
        (request_id(), profile(), approval_request(), evidence_refs()).prop_map(
            |(request_id, profile, approval, evidence)| ExecutionOutcome::Escalated {
                request_id,
                profile,
                approval,
                evidence
            }
        ),
        (
            request_id(),
            profile(),
            failure(),
            any::<bool>(),
            evidence_refs(),
            degradations()
        )
            .prop_map(
                |(request_id, profile, failure, call_executed, evidence, degradations)| {
                    ExecutionOutcome::Failed {
                        request_id,
                        profile,
                        failure,
                        call_executed,
                        evidence,
                        degradations,
                    }
                }
            ),
        (
            request_id(),
            profile(),
            any::<bool>(),
            evidence_refs(),
            degradations()
        )
            .prop_map(
                |(request_id, profile, call_executed, evidence, degradations)| {
                    ExecutionOutcome::Cancelled {
                        request_id,
                        profile,
                        call_executed,
                        evidence,
                        degradations,
                    }
                }
            ),
        (
            request_id(),
            profile(),
            any::<bool>(),
            evidence_refs(),
            degradations()
        )
            .prop_map(
                |(request_id, profile, call_executed, evidence, degradations)| {
                    ExecutionOutcome::TimedOut {
                        request_id,
                        profile,
                        call_executed,
                        evidence,
                        degradations,
                    }
                }
            ),
        (
            request_id(),
            profile(),
            text(),
            evidence_refs(),
            degradations()
        )
            .prop_map(|(request_id, profile, message, evidence, degradations)| {
                ExecutionOutcome::Ambiguous {
                    request_id,
                    profile,
                    message,
                    evidence,
                    degradations,
                }
            }),
    ]
}

fn record_type() -> impl Strategy<Value = RecordType> {
    proptest::sample::select(RecordType::ALL.to_vec())
}

fn evidence_record() -> impl Strategy<Value = EvidenceRecord> {
    (
        (
            record_id(),
            record_type(),
            chain_id(),
            proptest::option::of(operation_id()),
            0u64..1000,
        ),
        (
            text(),
            text(),
            json_value(),
            proptest::option::of(digest()),
            digest(),
        ),
        (proptest::option::of(record_id()), timestamp()),
    )
        .prop_map(
            |(
                (record_id, record_type, chain_id, operation_id, sequence),
                (policy_id, policy_version, payload, previous_chain_hash, chain_hash),
                (supersedes_record_id, created_at),
            )| {
                let payload_json = to_canonical_string(&payload).unwrap();
                EvidenceRecord {
                    record_id,
                    record_type,
                    chain_id,
                    operation_id,
                    sequence,
                    policy_id,
                    policy_version,
                    payload_digest: Digest::of_bytes(payload_json.as_bytes()),
                    payload_json,
                    previous_chain_hash,
                    chain_hash,
                    supersedes_record_id,
                    created_at,
                    hash_algorithm: HASH_ALGORITHM.into(),
                }
            },
        )
}

fn evidence_append() -> impl Strategy<Value = EvidenceAppend> {
    (
        chain_id(),
        record_type(),
        proptest::option::of(operation_id()),
        0u64..1000,
        (text(), text()),
        json_value(),
        proptest::option::of(record_id()),
        timestamp(),
    )
        .prop_map(
            |(
                chain_id,
                record_type,
                operation_id,
                expected_sequence,
                (policy_id, policy_version),
                payload,
                supersedes_record_id,
                created_at,
            )| EvidenceAppend {
                chain_id,
                record_type,
                operation_id,
                expected_sequence,
                policy_id,
                policy_version,
                payload,
                supersedes_record_id,
                created_at,
            },
        )
}

fn chain_head() -> impl Strategy<Value = ChainHead> {
    (chain_id(), 0u64..1000, digest()).prop_map(|(chain_id, sequence, chain_hash)| ChainHead {
        chain_id,
        sequence,
        chain_hash,
    })
}

const FAILURES: [VerificationFailure; 13] = [
    VerificationFailure::InvalidGenesis,
    VerificationFailure::SequenceGap,
    VerificationFailure::BrokenLink,
    VerificationFailure::PayloadDigestMismatch,
    VerificationFailure::ChainHashMismatch,
    VerificationFailure::UnknownHashAlgorithm,
    VerificationFailure::HeadMismatch,
    VerificationFailure::MalformedRecord,
    VerificationFailure::InvalidPayload,
    VerificationFailure::OrphanRecord,
    VerificationFailure::DuplicateTerminal,
    VerificationFailure::MissingTerminal,
    VerificationFailure::RecordAfterClose,
];

fn verification() -> impl Strategy<Value = VerificationResult> {
    (
        any::<bool>(),
        proptest::option::of(chain_head()),
        0u64..1000,
        proptest::option::of(proptest::sample::select(FAILURES.to_vec())),
        proptest::option::of(record_id()),
    )
        .prop_map(
            |(valid, verified_head, checked_records, failure_code, failed_record_id)| {
                VerificationResult {
                    valid,
                    verified_head,
                    checked_records,
                    failure_code,
                    failed_record_id,
                }
            },
        )
}

const CAPABILITIES: [Capability; 8] = Capability::ALL;

fn capability_entry() -> impl Strategy<Value = CapabilityEntry> {
    (
        proptest::sample::select(CAPABILITIES.to_vec()),
        prop_oneof![
            Just(CapabilityStatus::Enforced),
            Just(CapabilityStatus::Degraded),
            Just(CapabilityStatus::Unsupported)
        ],
        text(),
    )
        .prop_map(|(capability, status, detail)| CapabilityEntry {
            capability,
            status,
            detail,
        })
}

/// Optional containment a call ran without (usually none).
fn degradations() -> impl Strategy<Value = Vec<CapabilityEntry>> {
    proptest::collection::vec(capability_entry(), 0..3)
}

fn capability_report() -> impl Strategy<Value = CapabilityReport> {
    (
        backend_ref(),
        proptest::collection::vec(capability_entry(), 0..6),
    )
        .prop_map(|(backend, entries)| CapabilityReport { backend, entries })
}

fn process_spec() -> impl Strategy<Value = ProcessSpec> {
    (
        (text(), proptest::collection::vec(text(), 0..4), text()),
        (
            proptest::collection::vec("[A-Z_]{1,8}", 0..3),
            proptest::collection::btree_map("[A-Z_]{1,8}", text(), 0..3),
        ),
        proptest::option::of(text()),
        (
            proptest::collection::vec(text(), 0..3),
            proptest::option::of(proptest::collection::vec(text(), 0..3)),
        ),
        (
            any::<bool>(),
            proptest::option::of(0u64..1_000_000),
            proptest::option::of(0u64..1_000_000),
        ),
    )
        .prop_map(
            |(
                (program, args, cwd),
                (env_allowlist, env_set),
                stdin,
                (write_roots, read_roots),
                (network, timeout_ms, max_output_bytes),
            )| ProcessSpec {
                program,
                args,
                cwd,
                env_allowlist,
                env_set: env_set.into_iter().collect::<BTreeMap<_, _>>(),
                stdin,
                write_roots,
                read_roots,
                network,
                timeout_ms,
                max_output_bytes,
                degradable: if network {
                    vec![Capability::NetworkOff]
                } else {
                    Vec::new()
                },
            },
        )
}

fn process_output() -> impl Strategy<Value = ProcessOutput> {
    (
        proptest::option::of(any::<i32>()),
        proptest::option::of(1i32..64),
        text(),
        text(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(exit_code, signal, stdout, stderr, truncated, timed_out)| ProcessOutput {
                exit_code,
                signal,
                stdout,
                stderr,
                truncated,
                timed_out,
            },
        )
}

// ---------------------------------------------------------------- canonical text of typed values

/// `to_canonical_string_of` through the `Value` route: what it must equal.
fn via_value<T: Serialize + ?Sized>(value: &T) -> Result<String, OfError> {
    let v = serde_json::to_value(value).map_err(|e| OfError::Serialize(e.to_string()))?;
    Ok(to_canonical_string(&v)?)
}

/// Members in the order it is given (unsorted, repeated, or not serializable at all).
struct Members(Vec<(&'static str, Value)>, bool);

impl Serialize for Members {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{Error as _, SerializeMap as _};
        if self.1 {
            return Err(S::Error::custom("refused by its own Serialize"));
        }
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

/// A `Serialize` that breaks serde's order: a key, then another key, then one value.
struct KeyWithoutValue;

impl Serialize for KeyWithoutValue {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let mut map = s.serialize_map(None)?;
        map.serialize_key("b")?;
        map.serialize_key("a")?;
        map.serialize_value(&1)?;
        map.end()
    }
}

#[derive(Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Shape {
    Unit,
    Struct { z: u8, a: Option<String> },
}

#[derive(Serialize)]
enum External {
    Unit,
    Newtype(u32),
    Tuple(u8, bool),
    Struct { b: char, a: () },
}

#[test]
fn canonical_text_straight_from_serialize_is_the_value_routes_for_every_shape() {
    let members = |m: Vec<(&'static str, Value)>| Members(m, false);
    let cases: Vec<Box<dyn erased::Ser>> = vec![
        Box::new(members(vec![("b", json!(1)), ("a", json!([true, null]))])),
        // A repeated key: the `Value` route keeps the last one.
        Box::new(members(vec![
            ("a", json!(1)),
            ("b", json!(2)),
            ("a", json!(3)),
        ])),
        // Keys that need escaping or are not ASCII, sorted by UTF-16 code units.
        Box::new(members(vec![
            ("\u{e000}", json!(1)),
            ("😀", json!(2)),
            ("q\"", json!(3)),
        ])),
        // Numbers only the `Value` route writes: floats, integers beyond 2^53 − 1.
        Box::new(members(vec![
            ("f", json!(1.5)),
            ("i", json!(9_007_199_254_740_993u64)),
        ])),
        Box::new(members(vec![("big", json!(-9_007_199_254_740_992i64))])),
        Box::new(Members(vec![], true)),
        Box::new(KeyWithoutValue),
        Box::new(vec![
            Shape::Unit,
            Shape::Struct {
                z: 7,
                a: Some("é\n".into()),
            },
        ]),
        Box::new(vec![
            External::Unit,
            External::Newtype(3),
            External::Tuple(1, false),
            External::Struct { b: '"', a: () },
        ]),
        Box::new(BTreeMap::from([(1u8, "integer keys")])),
        Box::new(HashMap::from([("k", vec![Some(1u64), None])])),
    ];
    for (i, case) in cases.iter().enumerate() {
        assert_eq!(case.direct(), case.via(), "case {i}");
    }
    assert_eq!(
        to_canonical_string_of(&members(vec![
            ("b", json!(1)),
            ("a", json!({"d": [], "c": {}}))
        ]))
        .unwrap(),
        r#"{"a":{"c":{},"d":[]},"b":1}"#
    );
    assert!(matches!(
        to_canonical_string_of(&Members(vec![], true)),
        Err(OfError::Serialize(m)) if m.contains("refused by its own Serialize")
    ));
}

/// Object-safe access to both routes for the table above.
mod erased {
    use super::*;

    pub(crate) trait Ser {
        fn direct(&self) -> Result<String, OfError>;
        fn via(&self) -> Result<String, OfError>;
    }

    impl<T: Serialize> Ser for T {
        fn direct(&self) -> Result<String, OfError> {
            to_canonical_string_of(self)
        }
        fn via(&self) -> Result<String, OfError> {
            via_value(self)
        }
    }
}

/// ASCII-keyed members in any order (a map that keeps insertion order writes them so).
fn ascii_members() -> impl Strategy<Value = Map<String, Value>> {
    proptest::collection::vec(("[a-c !]{0,2}", json_value()), 0..8)
        .prop_map(|pairs| pairs.into_iter().collect())
}

// ---------------------------------------------------------------- properties

proptest! {
    #![proptest_config(config())]

    #[test]
    fn canonical_text_straight_from_serialize_is_the_value_routes(
        v in json_value(),
        m in ascii_members(),
        req in request(),
        ctx in context(),
        out in outcome(),
    ) {
        prop_assert_eq!(to_canonical_string_of(&v), via_value(&v));
        prop_assert_eq!(to_canonical_string_of(&m), via_value(&m));
        prop_assert_eq!(to_canonical_string_of(&req), via_value(&req));
        prop_assert_eq!(to_canonical_string_of(&ctx), via_value(&ctx));
        prop_assert_eq!(to_canonical_string_of(&out), via_value(&out));
        prop_assert_eq!(
            Digest::of_serialize(&req).unwrap(),
            Digest::of_json(&serde_json::to_value(&req).unwrap()).unwrap()
        );
    }

    #[test]
    fn values_round_trip_match_schema_and_reject_unknown_fields(
        req in request(),
        ctx in context(),
        desc in descriptor(),
        dec in decision(),
        out in outcome(),
    ) {
        check("ExecutionRequest", &req);
        check("ExecutionContext", &ctx);
        check("ActionDescriptor", &desc);
        check("ActionRef", req.action());
        check("ExecutionScopeRef", req.execution_scope());
        check("ActionSource", desc.source());
        check("Hints", &desc.hints());
        check("EffectiveHints", &desc.hints().effective());
        check("PrincipalRef", ctx.authenticated_principal());
        check("PrincipalKind", &ctx.authenticated_principal().kind);
        check("BackendRef", ctx.effect_backend());
        if let Some(p) = ctx.policy_snapshot() { check("PolicySnapshotRef", p); }
        if let Some(t) = ctx.tenant() { check("TenantRef", t); }
        check("AdmissionDecision", &dec);
        check("Disposition", &dec.disposition());
        check("DecisionReason", dec.reason());
        check("ReasonCode", &dec.reason().code);
        check("ExecutionOutcome", &out);
        check("RuntimeProfile", &out.profile());
        check("RequestId", out.request_id());
    }

    #[test]
    fn approvals_and_evidence_round_trip(
        areq in approval_request(),
        receipt in approval_receipt(),
        record in evidence_record(),
        append in evidence_append(),
        head in chain_head(),
        result in verification(),
        eref in evidence_ref(),
        failure in failure(),
        ts in timestamp(),
    ) {
        check("ApprovalRequest", &areq);
        check("ApprovalReceipt", &receipt);
        check("EvidenceRecord", &record);
        check("RecordType", &record.record_type);
        check("EvidenceAppend", &append);
        check("ChainHead", &head);
        check("AppendReceipt", &AppendReceipt {
            chain_id: head.chain_id.clone(),
            record_id: record.record_id.clone(),
            sequence: head.sequence,
            chain_hash: head.chain_hash.clone(),
        });
        check("VerificationResult", &result);
        if let Some(code) = result.failure_code { check("VerificationFailure", &code); }
        check("EvidenceRef", &eref);
        check("Failure", &failure);
        check("Timestamp", &ts);
        check("Digest", &record.chain_hash);
        check("ChainId", &record.chain_id);
        check("RecordId", &record.record_id);
        if let Some(op) = &record.operation_id { check("OperationId", op); }
        check("ApprovalId", &areq.approval_id);
        check("ReviewVerdict", &ReviewVerdict::Approved { receipt: receipt.clone() });
        check("ReviewVerdict", &ReviewVerdict::Refused { reason: areq.reason.clone() });
        check("DecisionEvent", &DecisionEvent {
            request_id: areq.request_id.clone(),
            stage: Stage::Authorize,
            decision: AdmissionDecision::new(Disposition::Allow, areq.reason.clone(), "policy").unwrap(),
        });
    }

    #[test]
    fn capabilities_and_processes_round_trip(
        report in capability_report(),
        spec in process_spec(),
        output in process_output(),
        ids in (context_id(), scope_id(), run_id(), attempt_id(), session_id(), principal_id(), tenant_id()),
    ) {
        check("CapabilityReport", &report);
        for entry in &report.entries {
            check("CapabilityEntry", entry);
            check("Capability", &entry.capability);
            check("CapabilityStatus", &entry.status);
        }
        check("ProcessSpec", &spec);
        check("ProcessOutput", &output);
        check("ContextId", &ids.0);
        check("ScopeId", &ids.1);
        check("RunId", &ids.2);
        check("AttemptId", &ids.3);
        check("SessionId", &ids.4);
        check("PrincipalId", &ids.5);
        check("TenantId", &ids.6);
    }

    /// The same JSON written with its keys in another order and with whitespace has the same
    /// canonical form and digest.
    #[test]
    fn canonical_json_is_stable_under_key_order(v in json_value()) {
        let reordered = reverse_key_order_text(&v);
        let parsed: Value = serde_json::from_str(&reordered).unwrap();
        prop_assert_eq!(to_canonical_string(&parsed).unwrap(), to_canonical_string(&v).unwrap());
        prop_assert_eq!(Digest::of_json(&parsed).unwrap(), Digest::of_json(&v).unwrap());
    }

    /// Canonical text parses back to the same value (numbers compared as doubles) and is a
    /// fixed point of canonicalization.
    #[test]
    fn canonical_json_round_trips(v in json_value()) {
        let text = to_canonical_string(&v).unwrap();
        let back: Value = serde_json::from_str(&text).unwrap();
        prop_assert!(same_json(&back, &v), "{} vs {}", back, v);
        prop_assert_eq!(to_canonical_string(&back).unwrap(), text);
    }

    #[test]
    fn digests_are_deterministic(v in json_value()) {
        let pretty: Value = serde_json::from_str(&serde_json::to_string_pretty(&v).unwrap()).unwrap();
        prop_assert_eq!(Digest::of_json(&v).unwrap(), Digest::of_json(&pretty).unwrap());
        let d = Digest::of_json(&v).unwrap();
        prop_assert_eq!(d.as_str().parse::<Digest>().unwrap(), d);
    }
}

/// Writes `v` as JSON text with every object's keys in reverse order and spaces around tokens.
fn reverse_key_order_text(v: &Value) -> String {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.reverse();
            let members: Vec<String> = keys
                .into_iter()
                .map(|k| {
                    format!(
                        "{} : {}",
                        serde_json::to_string(k).unwrap(),
                        reverse_key_order_text(&map[k])
                    )
                })
                .collect();
            format!("{{ {} }}", members.join(" , "))
        }
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(reverse_key_order_text).collect();
            format!("[ {} ]", items.join(" , "))
        }
        other => serde_json::to_string(other).unwrap(),
    }
}

fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same_json(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => a == b,
    }
}

// ---------------------------------------------------------------- invariants, table-driven

fn eph(id: &str) -> ExecutionScopeRef {
    ExecutionScopeRef::Ephemeral {
        scope_id: ScopeId::new(id).unwrap(),
    }
}

fn alice() -> PrincipalRef {
    PrincipalRef {
        id: PrincipalId::new("alice").unwrap(),
        kind: PrincipalKind::User,
    }
}

fn req_in(scope: ExecutionScopeRef) -> ExecutionRequest {
    ExecutionRequest::new(
        RequestId::new("r").unwrap(),
        ActionRef::new("read").unwrap(),
        json!({}),
        scope,
    )
    .unwrap()
}

fn ctx_with(scope: ExecutionScopeRef) -> ExecutionContext {
    ExecutionContext::new(
        ContextId::new("c").unwrap(),
        scope,
        alice(),
        BackendRef::new("in_process").unwrap(),
    )
}

#[test]
fn a_context_whose_scope_disagrees_with_the_request_is_an_error() {
    let err = ctx_with(eph("s-1"))
        .check_request(&req_in(eph("s-2")))
        .unwrap_err();
    assert!(
        matches!(
            err,
            ContractError::Mismatch {
                what: "execution_scope",
                ..
            }
        ),
        "{err}"
    );
    let durable = ExecutionScopeRef::DurableRun {
        run_id: RunId::new("s-1").unwrap(),
        owner_attempt_id: None,
    };
    // Same text, different kind: an ephemeral scope id is never a run id.
    assert!(
        ctx_with(eph("s-1"))
            .check_request(&req_in(durable))
            .is_err()
    );
    assert!(
        ctx_with(eph("s-1"))
            .check_request(&req_in(eph("s-1")))
            .is_ok()
    );
}

#[test]
fn a_principal_claim_cannot_override_the_context() {
    let mallory = PrincipalRef {
        id: PrincipalId::new("mallory").unwrap(),
        kind: PrincipalKind::User,
    };
    let err = ctx_with(eph("s"))
        .check_request(&req_in(eph("s")).with_principal_claim(mallory))
        .unwrap_err();
    assert!(
        matches!(
            err,
            ContractError::Mismatch {
                what: "principal",
                ..
            }
        ),
        "{err}"
    );
    assert!(
        ctx_with(eph("s"))
            .check_request(&req_in(eph("s")).with_principal_claim(alice()))
            .is_ok()
    );
}

#[test]
fn an_ephemeral_scope_never_reads_as_a_run() {
    let e = eph("run-1");
    assert_eq!(e.run_id(), None);
    assert!(e.is_ephemeral());
    let as_json = serde_json::to_value(&e).unwrap();
    // Relabelled as a durable run it no longer parses: the field is `scope_id`, not `run_id`.
    let mut relabelled = as_json.clone();
    relabelled["kind"] = json!("durable_run");
    assert!(serde_json::from_value::<ExecutionScopeRef>(relabelled).is_err());
}

#[test]
fn invalid_values_are_refused_when_deserializing() {
    let cases: &[(&str, Value)] = &[
        (
            "empty request id",
            json!({"request_id": "", "action": {"name": "x"}, "arguments": {}, "execution_scope": {"kind": "ephemeral", "scope_id": "s"}}),
        ),
        (
            "non-object arguments",
            json!({"request_id": "r", "action": {"name": "x"}, "arguments": [], "execution_scope": {"kind": "ephemeral", "scope_id": "s"}}),
        ),
        (
            "bad action name",
            json!({"request_id": "r", "action": {"name": "rm -rf"}, "arguments": {}, "execution_scope": {"kind": "ephemeral", "scope_id": "s"}}),
        ),
    ];
    for (what, value) in cases {
        assert!(
            serde_json::from_value::<ExecutionRequest>(value.clone()).is_err(),
            "{what} was accepted"
        );
    }
    let bad_digest = json!({"chain_id": "c", "record_id": "r", "chain_hash": "sha256:00"});
    assert!(serde_json::from_value::<EvidenceRef>(bad_digest).is_err());
    let upper = format!("blake3:{}", "A".repeat(64));
    assert!(upper.parse::<Digest>().is_err());
    let retry_on_deny = json!({"disposition": "deny", "reason": {"code": "policy_rule", "message": "m"}, "evaluator": "policy", "retry_at": 5});
    assert!(serde_json::from_value::<AdmissionDecision>(retry_on_deny).is_err());
    let escalate_without_approval = json!({"disposition": "escalate", "reason": {"code": "policy_rule", "message": "m"}, "evaluator": "policy"});
    assert!(serde_json::from_value::<AdmissionDecision>(escalate_without_approval).is_err());
    let receipt_expired_at_issue = json!({
        "approval_id": "a", "action": "bash", "arguments_digest": Digest::of_bytes(b"x"),
        "approver": {"id": "alice", "kind": "user"}, "issued_at": 10, "expires_at": 10
    });
    assert!(serde_json::from_value::<ApprovalReceipt>(receipt_expired_at_issue).is_err());
}

#[test]
fn unknown_fields_in_nested_and_tagged_values_are_named() {
    let nested = json!({"request_id": "r", "action": {"name": "x", "versoin": "1"}, "arguments": {}, "execution_scope": {"kind": "ephemeral", "scope_id": "s"}});
    let err = serde_json::from_value::<ExecutionRequest>(nested).unwrap_err();
    assert!(err.to_string().contains("unknown field `versoin`"), "{err}");
    let tagged = json!({"kind": "durable_run", "run_id": "r", "owner_attempt": "a"});
    let err = serde_json::from_value::<ExecutionScopeRef>(tagged).unwrap_err();
    assert!(
        err.to_string().contains("unknown field `owner_attempt`"),
        "{err}"
    );
}

#[test]
fn hints_assume_the_worst() {
    // (read_only, destructive, idempotent, open_world) → effective
    let table = [
        (Hints::UNKNOWN, (false, true, false, true)),
        (
            Hints {
                read_only: Some(true),
                ..Hints::UNKNOWN
            },
            (true, false, true, true),
        ),
        (
            Hints {
                read_only: Some(true),
                destructive: Some(true),
                idempotent: Some(true),
                open_world: Some(false),
            },
            (false, true, false, false),
        ),
        (
            Hints {
                read_only: Some(false),
                destructive: Some(false),
                idempotent: Some(true),
                open_world: Some(false),
            },
            (false, false, true, false),
        ),
    ];
    for (hints, (r, d, i, o)) in table {
        let e = hints.effective();
        assert_eq!(
            (e.read_only, e.destructive, e.idempotent, e.open_world),
            (r, d, i, o),
            "{hints:?}"
        );
    }
}

#[test]
fn a_null_result_is_a_success_and_distinct_from_failure() {
    let ok = ExecutionOutcome::Succeeded {
        request_id: RequestId::new("r").unwrap(),
        profile: RuntimeProfile::Governed,
        result: Value::Null,
        evidence: vec![],
        degradations: vec![],
    };
    let json = serde_json::to_value(&ok).unwrap();
    assert_eq!(
        json,
        json!({"status": "succeeded", "request_id": "r", "profile": "governed", "result": null})
    );
    let back: ExecutionOutcome = serde_json::from_value(json).unwrap();
    assert!(back.is_success());
    assert_eq!(back.call_executed(), Some(true));
    // A succeeded outcome without `result` is not a null success: it is refused.
    assert!(
        serde_json::from_value::<ExecutionOutcome>(
            json!({"status": "succeeded", "request_id": "r", "profile": "minimal"})
        )
        .is_err()
    );
}

#[test]
fn degradations_are_recorded_only_where_a_call_may_have_run() {
    let entry = CapabilityEntry {
        capability: Capability::NetworkOff,
        status: CapabilityStatus::Unsupported,
        detail: "network_namespace simulated as unavailable".into(),
    };
    let r = || RequestId::new("r").unwrap();
    let failed = ExecutionOutcome::Failed {
        request_id: r(),
        profile: RuntimeProfile::Minimal,
        failure: Failure {
            kind: "exit_status".into(),
            message: "exit code 1".into(),
        },
        call_executed: true,
        evidence: vec![],
        degradations: vec![],
    }
    .with_degradations(vec![entry.clone()]);
    assert_eq!(failed.degradations(), std::slice::from_ref(&entry));
    check("ExecutionOutcome", &failed);
    let json = serde_json::to_value(&failed).unwrap();
    assert_eq!(json["degradations"][0]["status"], "unsupported");
    // Nothing ran: nothing ran degraded.
    let cancelled = ExecutionOutcome::Cancelled {
        request_id: r(),
        profile: RuntimeProfile::Minimal,
        call_executed: false,
        evidence: vec![],
        degradations: vec![],
    }
    .with_degradations(vec![entry.clone()]);
    assert!(cancelled.degradations().is_empty());
    let denied = ExecutionOutcome::Denied {
        request_id: r(),
        profile: RuntimeProfile::Minimal,
        reason: DecisionReason::new(ReasonCode::Containment, "not proven"),
        evaluator: "backend".into(),
        stop: false,
        evidence: vec![],
    }
    .with_degradations(vec![entry]);
    assert!(denied.degradations().is_empty());
    // An outcome serialized before degradations existed still reads.
    let old = json!({"status": "timed_out", "request_id": "r", "profile": "minimal", "call_executed": true});
    let back: ExecutionOutcome = serde_json::from_value(old).unwrap();
    assert!(back.degradations().is_empty());
}

#[test]
fn redacted_values_never_show() {
    let secret = Redacted::new("hunter2".to_owned());
    assert_eq!(format!("{secret:?}"), "***");
    assert_eq!(format!("{secret}"), "***");
    assert_eq!(serde_json::to_value(&secret).unwrap(), json!("***"));
    assert_eq!(secret.expose(), "hunter2");
    check(
        "SecretRef",
        &SecretRef::Env {
            name: "GITHUB_TOKEN".into(),
        },
    );
    check(
        "SecretRef",
        &SecretRef::Store {
            store: "keychain".into(),
            key: "gh".into(),
        },
    );
    check("ReceiptMismatch", &ReceiptMismatch::Arguments);
    check("Stage", &Stage::Reauthorize);
    check(
        "EvidenceError",
        &EvidenceError::SequenceConflict {
            chain_id: ChainId::new("c").unwrap(),
            expected: 3,
            got: 2,
        },
    );
    check(
        "BackendError",
        &BackendError::Containment {
            message: "no landlock".into(),
        },
    );
    check("ReviewVerdict", &ReviewVerdict::Pending {});
    let digest = Digest::of_json(&json!({"command": "echo safe"})).unwrap();
    let receipt = ApprovalReceipt::new(
        ApprovalId::new("ap-1").unwrap(),
        "bash",
        digest,
        None,
        PrincipalRef {
            id: PrincipalId::new("alice").unwrap(),
            kind: PrincipalKind::User,
        },
        Timestamp(1),
        Timestamp(2),
    )
    .unwrap();
    let mut replacement = Map::new();
    replacement.insert("command".into(), json!("echo safe"));
    check(
        "ReviewVerdict",
        &ReviewVerdict::ApprovedWithArguments {
            receipt,
            arguments: replacement,
        },
    );
    check("StageStatus", &StageStatus::Skipped);
    check(
        "StageEvent",
        &StageEvent {
            request_id: RequestId::new("r-1").unwrap(),
            stage: Stage::Transform,
            status: StageStatus::Skipped,
            detail: Some("no transforms".into()),
        },
    );
    check(
        "StageEvent",
        &StageEvent {
            request_id: RequestId::new("r-1").unwrap(),
            stage: Stage::Invoke,
            status: StageStatus::Ran,
            detail: None,
        },
    );
    let ask = PolicyAnswer::new(
        Disposition::Escalate,
        DecisionReason::new(ReasonCode::PolicyRule, "ask").with_rule("bash(git push:*)"),
        "policy",
    )
    .unwrap()
    .with_authority("security-team")
    .unwrap();
    check("PolicyAnswer", &ask);
    let stop = PolicyAnswer::new(
        Disposition::Deny,
        DecisionReason::new(ReasonCode::PolicyRule, "deny"),
        "policy",
    )
    .unwrap()
    .with_stop()
    .unwrap();
    check("PolicyAnswer", &stop);
    assert!(stop.stop());
    // A policy never defers, only a deny stops, and the wire form enforces both.
    assert!(
        PolicyAnswer::new(
            Disposition::Defer,
            DecisionReason::new(ReasonCode::Capacity, "full"),
            "policy"
        )
        .is_err()
    );
    assert!(ask.clone().with_stop().is_err());
    let mut wire = serde_json::to_value(&ask).unwrap();
    wire["stop"] = json!(true);
    assert!(serde_json::from_value::<PolicyAnswer>(wire).is_err());
    let mut wire = serde_json::to_value(&stop).unwrap();
    wire["disposition"] = json!("defer");
    assert!(serde_json::from_value::<PolicyAnswer>(wire).is_err());
    let validator = validators().get("Redacted").unwrap();
    assert!(validator.is_valid(&serde_json::to_value(&secret).unwrap()));
}

#[test]
fn every_published_schema_is_exercised_by_a_test() {
    // The names checked somewhere in this file; a new type must be added both to
    // `schema::all()` and here.
    let source = include_str!("contracts.rs");
    for s in warden_contracts::schema::all() {
        let needle = format!("\"{}\"", s.name);
        assert!(
            source.contains(&needle),
            "schema {} is published but never checked",
            s.name
        );
    }
}

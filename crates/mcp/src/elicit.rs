//! An `ask` answered by the person at the MCP client: the proxy asks through the client's
//! elicitation (`elicitation/create`, a form with one yes/no field) and a "yes" becomes a
//! receipt for exactly that call, used once. Anything else (a "no", a declined or dismissed
//! form, a client that cannot ask, an error) refuses.
//!
//! Receipts minted here are unsigned: they count only under a policy that declares no
//! `[approvers]` (the local-operator model). A policy that names its approvers is answered by
//! them alone, so the proxy does not ask its client then.

use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use rmcp::RoleServer;
use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema};
use rmcp::service::Peer;
use serde_json::{Map, Value, json};
use warden_contracts::{
    ApprovalReceipt, ApprovalRequest, DecisionReason, PrincipalId, PrincipalKind, PrincipalRef,
    ReasonCode, ReviewVerdict, Reviewer,
};
use warden_executor::{Clock, DEFAULT_APPROVAL_TTL_MS, SystemClock, local_receipt};

/// The longest argument text shown in a question (the rest is cut, and said so).
const SHOWN_ARGUMENTS: usize = 2_000;

/// Asks the client's user about escalated calls.
pub(crate) struct ClientApproval {
    peer: OnceLock<Peer<RoleServer>>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for ClientApproval {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientApproval").finish_non_exhaustive()
    }
}

impl ClientApproval {
    pub(crate) fn new() -> Self {
        Self {
            peer: OnceLock::new(),
            clock: Arc::new(SystemClock),
        }
    }

    /// The client to ask (its session is the proxy's one session).
    pub(crate) fn connect(&self, peer: &Peer<RoleServer>) {
        let _ = self.peer.set(peer.clone());
    }

    fn receipt(
        &self,
        request: &ApprovalRequest,
        arguments: &Map<String, Value>,
    ) -> Result<ApprovalReceipt, String> {
        let approver = PrincipalRef {
            id: PrincipalId::new("mcp-client-user").map_err(|e| e.to_string())?,
            kind: PrincipalKind::User,
        };
        local_receipt(
            request,
            arguments,
            approver,
            self.clock.now(),
            DEFAULT_APPROVAL_TTL_MS,
        )
    }
}

/// The question: the call, why the policy asks, and its arguments.
fn question(request: &ApprovalRequest, arguments: &Map<String, Value>) -> String {
    let mut shown = Value::Object(arguments.clone()).to_string();
    if shown.len() > SHOWN_ARGUMENTS {
        let mut cut = SHOWN_ARGUMENTS;
        while !shown.is_char_boundary(cut) {
            cut -= 1;
        }
        shown.truncate(cut);
        shown.push_str(" … (cut)");
    }
    format!(
        "Warden's policy asks before `{}` runs: {}\nArguments: {shown}\nRun this call once?",
        request.action, request.reason.message
    )
}

fn form() -> Result<ElicitationSchema, String> {
    serde_json::from_value(json!({
        "type": "object",
        "properties": {
            "approve": {
                "type": "boolean",
                "title": "Approve",
                "description": "Run exactly this call, once"
            }
        },
        "required": ["approve"]
    }))
    .map_err(|e| e.to_string())
}

fn refused(message: impl Into<String>) -> ReviewVerdict {
    ReviewVerdict::Refused {
        reason: DecisionReason::new(ReasonCode::ApprovalRefused, message),
    }
}

#[async_trait]
impl Reviewer for ClientApproval {
    async fn review(&self, _request: &ApprovalRequest) -> ReviewVerdict {
        refused("a question needs the call's arguments")
    }

    async fn review_call(
        &self,
        request: &ApprovalRequest,
        arguments: &Map<String, Value>,
    ) -> ReviewVerdict {
        let Some(peer) = self.peer.get() else {
            return refused("no MCP client to ask");
        };
        let schema = match form() {
            Ok(s) => s,
            Err(e) => return refused(format!("the question could not be built: {e}")),
        };
        let params = ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: question(request, arguments),
            requested_schema: schema,
        };
        match peer.create_elicitation(params).await {
            Ok(ElicitResult {
                action: ElicitationAction::Accept,
                content: Some(content),
                ..
            }) if content.get("approve") == Some(&Value::Bool(true)) => {
                match self.receipt(request, arguments) {
                    Ok(receipt) => ReviewVerdict::Approved { receipt },
                    Err(e) => refused(format!("the approval could not be recorded: {e}")),
                }
            }
            Ok(ElicitResult {
                action: ElicitationAction::Accept,
                ..
            }) => refused("the user answered no"),
            Ok(ElicitResult {
                action: ElicitationAction::Decline,
                ..
            }) => refused("the user declined"),
            Ok(_) => refused("the user dismissed the question"),
            Err(e) => refused(format!("the client could not be asked: {e}")),
        }
    }
}

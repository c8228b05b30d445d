//! Terraform's `backend` block as what Nivis's state backend needs (DESIGN §99): an `s3`
//! backend's settings as the equivalent `nivis.backend`, written into `flake.nix` commented
//! out, and plain notes for what does not carry over.
//!
//! Owns: the field mapping (bucket, key, region, endpoint, path style, profile, workspace
//! prefix) and the Nivis key beside Terraform's. Not: recording the state (convert records it
//! in OUT's backend as the flags say; moving it into the bucket is `nivis state migrate`, the
//! user's explicit step), nor the flake's other text (`flake`).

use hcl::Expression;

use super::ast::TfBackend;
use super::parse_hcl::literal_string;
use crate::nixsyntax::nix_string;

/// What the flake says about the backend: the commented `nivis.backend` lines (empty when
/// there is no equivalent) and notes for the user.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Carried {
    /// Lines of `flake.nix`, each a Nix comment.
    pub(crate) comment: Vec<String>,
    /// Remarks printed after the conversion.
    pub(crate) notes: Vec<String>,
}

/// Nivis's state key beside Terraform's: `team/terraform.tfstate` is
/// `team/terraform.nivis.state`; any other key gets `.nivis.state` appended. Never Terraform's
/// own key: the two tools must not write one object.
pub(crate) fn nivis_key(key: &str) -> String {
    match key.strip_suffix(".tfstate") {
        Some(stem) => format!("{stem}.nivis.state"),
        None => format!("{key}.nivis.state"),
    }
}

/// The backend's equivalent; `None` gives nothing (no backend block: a local state).
pub(crate) fn carry(backend: Option<&TfBackend>) -> Carried {
    let Some(b) = backend else {
        return Carried::default();
    };
    if b.kind != "s3" {
        return Carried {
            comment: Vec::new(),
            notes: vec![format!(
                "Terraform keeps this state in a `{}` backend, which Nivis has no equivalent \
                 of: the Nivis state is local (or where --state says); see the book's \"Remote \
                 state\" for Nivis's S3 backend",
                b.kind
            )],
        };
    }
    let mut fields = vec!["type = \"s3\";".to_string()];
    let mut notes = Vec::new();
    let mut left_out = Vec::new();
    for (name, e) in &b.settings {
        let text = literal_string(e).or_else(|| match e {
            Expression::Bool(v) => Some(v.to_string()),
            _ => None,
        });
        let field = match name.as_str() {
            "bucket" => "bucket",
            "key" => "key",
            "region" => "region",
            "endpoint" => "endpoint",
            "force_path_style" | "use_path_style" => "usePathStyle",
            "profile" => "profile",
            "workspace_key_prefix" => "envKeyPrefix",
            "access_key" | "secret_key" | "token" => {
                notes.push(format!(
                    "the s3 backend's `{name}` is a credential and is not carried: Nivis reads \
                     AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN or a profile"
                ));
                continue;
            }
            _ => {
                left_out.push(name.clone());
                continue;
            }
        };
        let Some(text) = text else {
            left_out.push(name.clone());
            continue;
        };
        let value = match field {
            "usePathStyle" => text,
            "key" => nix_string(&nivis_key(&text)),
            _ => nix_string(&text),
        };
        fields.push(format!("{field} = {value};"));
    }
    if !left_out.is_empty() {
        let names: Vec<String> = left_out.iter().map(|n| format!("`{n}`")).collect();
        notes.push(format!(
            "the s3 backend's {} have no Nivis equivalent and are not carried (Nivis locks with \
             an object of its own, not DynamoDB, and encrypts on this machine with \
             encryptionKeyEnv/encryptionKeyFile)",
            names.join(", ")
        ));
    }
    notes.insert(
        0,
        "Terraform keeps this state in S3: flake.nix holds the equivalent `nivis.backend`, \
         commented out (the state convert recorded is local); to keep Nivis's state in the \
         bucket, uncomment it and run `nivis state migrate`"
            .to_string(),
    );
    Carried {
        comment: commented(&fields),
        notes,
    }
}

/// The flake's lines for `nivis.backend = { FIELDS };`, commented out.
fn commented(fields: &[String]) -> Vec<String> {
    vec![
        "# Terraform kept this estate's state in S3 (backend \"s3\"). To keep Nivis's state in"
            .into(),
        "# the same bucket (under a key of its own), uncomment and run `nivis state migrate`:"
            .into(),
        format!("# nivis.backend = {{ {} }};", fields.join(" ")),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    fn s3(settings: &[(&str, &str)]) -> TfBackend {
        TfBackend {
            kind: "s3".into(),
            settings: settings
                .iter()
                .map(|(k, v)| (k.to_string(), Expression::from_str(v).unwrap()))
                .collect(),
        }
    }

    #[test]
    fn an_s3_backend_becomes_the_commented_nivis_backend() {
        let got = carry(Some(&s3(&[
            ("bucket", "\"team-state\""),
            ("key", "\"infra/terraform.tfstate\""),
            ("region", "\"eu-west-1\""),
            ("endpoint", "\"http://127.0.0.1:8333\""),
            ("force_path_style", "true"),
            ("workspace_key_prefix", "\"envs\""),
            ("dynamodb_table", "\"locks\""),
            ("encrypt", "true"),
            ("secret_key", "\"not-in-the-flake\""),
        ])));
        assert_eq!(
            got.comment[2],
            "# nivis.backend = { type = \"s3\"; bucket = \"team-state\"; key = \
             \"infra/terraform.nivis.state\"; region = \"eu-west-1\"; endpoint = \
             \"http://127.0.0.1:8333\"; usePathStyle = true; envKeyPrefix = \"envs\"; };"
        );
        assert!(got.comment.iter().all(|l| l.starts_with('#')));
        assert!(!format!("{got:?}").contains("not-in-the-flake"));
        assert!(
            got.notes[0].contains("nivis state migrate"),
            "{:?}",
            got.notes
        );
        assert!(
            got.notes
                .iter()
                .any(|n| n.contains("`dynamodb_table`, `encrypt`")),
            "{:?}",
            got.notes
        );
        assert!(got
            .notes
            .iter()
            .any(|n| n.contains("`secret_key` is a credential")));
    }

    #[test]
    fn other_backends_and_keys() {
        assert_eq!(carry(None), Carried::default());
        let gcs = carry(Some(&TfBackend {
            kind: "gcs".into(),
            settings: Vec::new(),
        }));
        assert!(gcs.comment.is_empty());
        assert!(gcs.notes[0].contains("`gcs` backend"), "{:?}", gcs.notes);
        assert_eq!(nivis_key("a/terraform.tfstate"), "a/terraform.nivis.state");
        assert_eq!(nivis_key("state"), "state.nivis.state");
    }
}

//! Issue 27, case 6: a provider that quotes a sensitive value in another encoding (URL-encoded,
//! Go-JSON-escaped, hex, base64 at each alignment) in its error and its own log has none of
//! these forms reach stdout, stderr, `--json` or the `-v` logs.

use super::sandbox::*;

/// `value` as the fake quotes it, and as the hunt must not find it: URL-encoded (either case),
/// JSON-escaped the Go way, plus [`leak_forms`] (itself, hex, base64 at three alignments).
fn encoded_forms(value: &str) -> Vec<Vec<u8>> {
    let url = |upper: bool| -> String {
        value
            .bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                    (b as char).to_string()
                }
                _ if upper => format!("%{b:02X}"),
                _ => format!("%{b:02x}"),
            })
            .collect()
    };
    let json = serde_json::to_string(value)
        .unwrap()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026");
    let mut forms = leak_forms(value);
    forms.push(url(true).into_bytes());
    forms.push(url(false).into_bytes());
    forms.push(json.trim_matches('"').as_bytes().to_vec());
    forms
}

#[test]
fn a_provider_quoting_a_secret_encoded_leaks_none_of_its_forms() {
    let mut s = Sandbox::new();
    let value = format!("{}&<b> /+\"q", unique_token("nvvar"));
    let a = "(lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"A\"; config.label = vars.token; })";
    let plan = Sandbox::plan_let(
        &format!(
            "decls = {{ token = {{ type = \"string\"; sensitive = true; }}; }}; \
             vars = lib.vars ledger decls; a = {a};"
        ),
        "a",
        "variables = decls;",
    );
    Sandbox::write_flake(&s.proj, &plan);
    s.set_env("NIVIS_VAR_token", Some(&value));
    s.set_env("NIVIS_FAKE_LEAK_LABEL", Some("1"));
    let forms = encoded_forms(&value);
    for args in [
        &["apply", "--auto-approve"][..],
        &["apply", "--auto-approve", "--json"],
        &["apply", "--auto-approve", "-vv"],
    ] {
        let out = s.nivis(args);
        assert!(!out.status.success(), "{args:?} must fail");
        let all = [out.stdout.as_slice(), out.stderr.as_slice()].concat();
        let text = String::from_utf8_lossy(&all);
        // The error did arrive (so the check below looks at something).
        assert!(text.contains("the label was rejected"), "{args:?}: {text}");
        for form in &forms {
            assert!(
                !all.windows(form.len()).any(|w| w == &form[..]),
                "{args:?} printed the secret as {:?}:\n{text}",
                String::from_utf8_lossy(form)
            );
        }
    }
    // The control: the same plan with the variable not sensitive prints every form, so the
    // check above would see one.
    let shown = format!("{}&<b> /+\"q", unique_token("nvctl"));
    Sandbox::write_flake(
        &s.proj,
        &plan.replace("sensitive = true;", "sensitive = false;"),
    );
    s.set_env("NIVIS_VAR_token", Some(&shown));
    let out = s.nivis(&["apply", "--auto-approve"]);
    let all = [out.stdout.as_slice(), out.stderr.as_slice()].concat();
    // Every form but the raw one (printed escaped) and lower-case URL encoding (not the fake's).
    let mut forms = encoded_forms(&shown);
    forms.remove(0);
    forms.remove(forms.len() - 2);
    for form in forms {
        assert!(
            all.windows(form.len()).any(|w| w == &form[..]),
            "the control lacks {:?}: {}",
            String::from_utf8_lossy(&form),
            String::from_utf8_lossy(&all)
        );
    }
    s.hunt_for(&value, &[]);
}

//! Each run's secrets in its own `Redactor` (issue 31): the redactor a run is given learns what
//! the run's providers mark sensitive, and two runs in one process (as parallel tests are) do
//! not mask each other's secrets.

use nivis::secrets::MASK;
use serde_json::json;

use super::*;

const A: &str = "alpha.alpha_token.A";

/// A world whose `alpha` makes secrets `<prefix>-N`.
fn world_with_secrets(prefix: &str) -> World {
    let mut world = World::new();
    world.knobs.secret_prefix = Some(prefix.to_string());
    world
}

/// Applies one token and returns its secret as recorded.
fn apply_one_token(world: &World) -> String {
    world
        .apply(|_| ir(vec![token("A", json!({"label": "l"}))]))
        .report();
    let secret = world.state.attributes(A)["secret"].clone();
    secret.as_str().expect("a recorded secret").to_string()
}

#[test]
fn the_redactor_given_to_the_engine_learns_a_sensitive_output() {
    let world = world_with_secrets("redaction-learnt");
    let before = Redactor::new();
    let secret = apply_one_token(&world);
    assert!(secret.starts_with("redaction-learnt-"), "{secret}");
    let text = format!("provider said: {secret}.");
    assert_eq!(
        world.redactor.redact(&text),
        format!("provider said: {MASK}.")
    );
    // What prints for the run masks it, in text and in JSON.
    assert_eq!(
        nivis::render::escape_text(&world.redactor, &text),
        format!("provider said: {MASK}.")
    );
    let printed = nivis::render::json_text(&world.redactor, &json!({ "e": text }), false);
    assert!(!printed.contains(&secret), "{printed}");
    // A redactor the run was not given learnt nothing.
    assert_eq!(before.redact(&text), text);
}

#[test]
fn two_runs_in_one_process_keep_their_secrets_apart() {
    let (one, two) = (
        world_with_secrets("redaction-run-one"),
        world_with_secrets("redaction-run-two"),
    );
    let (secret_one, secret_two) = (apply_one_token(&one), apply_one_token(&two));
    let text = format!("error: {secret_one} then {secret_two}");
    assert_eq!(
        nivis::render::escape_text(&one.redactor, &text),
        format!("error: {MASK} then {secret_two}"),
        "run one masks its own secret and only that"
    );
    assert_eq!(
        nivis::render::escape_text(&two.redactor, &text),
        format!("error: {secret_one} then {MASK}"),
        "run two masks its own secret and only that"
    );
    // The same in two runs at once, on threads of their own (as parallel tests run).
    let (three, four) = (
        world_with_secrets("redaction-run-three"),
        world_with_secrets("redaction-run-four"),
    );
    let (secret_three, secret_four) = std::thread::scope(|s| {
        let three = s.spawn(|| apply_one_token(&three));
        let four = s.spawn(|| apply_one_token(&four));
        (three.join().unwrap(), four.join().unwrap())
    });
    let text = format!("{secret_three} {secret_four}");
    assert_eq!(
        three.redactor.redact(&text),
        format!("{MASK} {secret_four}")
    );
    assert_eq!(
        four.redactor.redact(&text),
        format!("{secret_three} {MASK}")
    );
}

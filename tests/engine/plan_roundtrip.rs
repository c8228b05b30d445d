//! The saved-plan round trip as a property: any plan's rows, written to a plan file and read
//! back, print as `nivis plan` printed them (`nivis show`). Plans are drawn from a seeded
//! generator: creates, updates, replaces, deletes, forgets, no-ops on deposed objects, moves,
//! imports and deferred resources, with nested values, unknowns and sensitive attributes.

use std::collections::BTreeMap;

use nivis::engine::plan_file::{Basis, SavedPlan, StateBasis};
use nivis::engine::{Action, AttrChange, Event, Wait};
use nivis::render::{Human, Style};
use nivis::secrets::Redactor;
use nivis::value::{PathStep, Value};

/// xorshift64*: small and deterministic.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// A known secret (remembered by the test): plan and show both print it redacted.
const SECRET: &str = "roundtrip-s3cret";

const WORDS: &[&str] = &[
    "label",
    "tags",
    "k v",
    "ünï",
    "say \"hi\"",
    "",
    "x\ny",
    "id",
    SECRET,
    "db://roundtrip-s3cret@host",
];

/// Map keys: no secret (a redacted key sorts elsewhere than the key did, so the two listings
/// of such a map differ in order only).
const KEYS: &[&str] = &["label", "k v", "ünï", "say \"hi\"", "", "x\ny"];

fn value(rng: &mut Rng, depth: usize) -> Value {
    match rng.below(if depth > 2 { 4 } else { 7 }) {
        0 => Value::Null,
        1 => Value::Bool(rng.chance(50)),
        2 => Value::Number(serde_json::Number::from(rng.below(1000) as u64)),
        3 => Value::String(rng.pick(WORDS).to_string()),
        4 => Value::List((0..rng.below(3)).map(|_| value(rng, depth + 1)).collect()),
        5 => Value::Map(
            (0..rng.below(3))
                .map(|_| (rng.pick(KEYS).to_string(), value(rng, depth + 1)))
                .collect::<BTreeMap<_, _>>(),
        ),
        _ => Value::Unknown,
    }
}

fn change(rng: &mut Rng) -> AttrChange {
    let mut path = vec![PathStep::Attr(
        rng.pick(&["label", "tags", "rules"]).to_string(),
    )];
    for _ in 0..rng.below(3) {
        path.push(match rng.below(2) {
            0 => PathStep::Key(rng.pick(WORDS).to_string()),
            _ => PathStep::Index(rng.below(4) as u64),
        });
    }
    // `null` is "absent" on the wire (docs/JSON-EVENTS.md), so a side is absent or not null.
    let side = |rng: &mut Rng| {
        rng.chance(80)
            .then(|| value(rng, 0))
            .filter(|v| *v != Value::Null)
    };
    AttrChange {
        path,
        before: side(rng),
        after: side(rng),
        sensitive: rng.chance(20),
        forces_replacement: rng.chance(20),
        write_only: rng.chance(10),
    }
}

fn planned(rng: &mut Rng, id: String, type_name: &str) -> Event {
    let action = *rng.pick(&[
        Action::Create,
        Action::Update,
        Action::Replace {
            create_before_destroy: false,
        },
        Action::Replace {
            create_before_destroy: true,
        },
        Action::Delete,
        Action::Forget,
        Action::Recreate,
        Action::NoOp,
    ]);
    Event::Planned {
        phase: 1,
        id,
        type_name: type_name.to_string(),
        action,
        changes: (0..rng.below(4)).map(|_| change(rng)).collect(),
        deposed: rng.chance(10).then(|| format!("{:08x}", rng.next() as u32)),
        drifted: (0..rng.below(2))
            .map(|i| format!("alpha.alpha_token.up{i}"))
            .collect(),
        triggered_by: (0..rng.below(2))
            .map(|i| format!("alpha.alpha_token.t{i}.value"))
            .collect(),
    }
}

fn wait(rng: &mut Rng) -> Wait {
    let resource = format!("alpha.alpha_token.w{}", rng.below(3));
    match rng.below(4) {
        0 => Wait::Nix {
            resource,
            attribute: "id".into(),
        },
        1 => Wait::Resource(resource),
        2 => Wait::Recomputed(resource),
        _ => Wait::ProviderConfig("beta".into()),
    }
}

/// A plan's rows in the order `nivis plan` lists them: moves, imports, then each resource
/// planned or deferred.
fn plan(rng: &mut Rng) -> Vec<Event> {
    let mut events = Vec::new();
    for i in 0..rng.below(3) {
        events.push(Event::Moved {
            phase: 1,
            from: format!("alpha.alpha_token.old{i}"),
            to: format!("alpha.alpha_token.new{i}"),
            type_name: "alpha_token".into(),
            recorded: false,
        });
    }
    for i in 0..rng.below(3) {
        events.push(Event::Imported {
            phase: 1,
            id: format!("alpha.alpha_token.imp{i}"),
            type_name: "alpha_token".into(),
            import_id: format!("object \"{i}\""),
            recorded: false,
        });
    }
    let mut rows = Vec::new();
    for i in 0..rng.below(6) {
        let type_name = *rng.pick(&["alpha_token", "beta_record"]);
        let id = format!(
            "{}.{type_name}.r{i}",
            &type_name[..type_name.find('_').unwrap()]
        );
        rows.push(match rng.chance(25) {
            true => Event::Deferred {
                phase: 1,
                id,
                type_name: type_name.to_string(),
                in_state: rng.chance(50),
                waits: (0..1 + rng.below(2)).map(|_| wait(rng)).collect(),
            },
            false => planned(rng, id, type_name),
        });
    }
    // A saved plan keeps the planned rows before the deferred ones.
    rows.sort_by_key(|e| matches!(e, Event::Deferred { .. }));
    events.extend(rows);
    events
}

fn printed(events: &[Event], redactor: &Redactor) -> String {
    let mut human = Human::new(Style { color: false }, redactor.clone());
    let mut out = Vec::new();
    for e in events {
        human.write_event(&mut out, e.clone());
    }
    String::from_utf8(out).unwrap()
}

fn basis() -> Basis {
    Basis {
        ir_digest: "sha256:0".into(),
        state: StateBasis {
            lineage: "l".into(),
            serial: 1,
            env: "default".into(),
        },
        variables: BTreeMap::new(),
        providers: BTreeMap::new(),
        targets: Vec::new(),
        replace: Vec::new(),
    }
}

#[test]
fn any_plan_shows_from_its_file_as_it_printed() {
    let redactor = Redactor::new();
    redactor.remember(SECRET);
    for seed in 1..=500u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let events = plan(&mut rng);
        let file = SavedPlan::new(basis(), &events).to_canonical(&redactor);
        let read = SavedPlan::parse(file.as_bytes())
            .unwrap_or_else(|e| panic!("seed {seed}: {e}\n{file}"));
        assert_eq!(
            read.to_canonical(&redactor),
            file,
            "seed {seed}: canonical again"
        );
        assert!(!file.contains(SECRET), "seed {seed}: {file}");
        let shown = read.events().unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert_eq!(
            printed(&shown, &redactor),
            printed(&events, &redactor),
            "seed {seed}: show differs from plan\n{file}"
        );
    }
}

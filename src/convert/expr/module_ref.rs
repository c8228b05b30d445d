//! References to a module's outputs (`module.NAME.OUT`), of one call or of the instances of a
//! call with count or for_each. (A part of `expr`, kept apart so each file stays readable.)

use hcl::expr::TraversalOperator;

use super::{Shape, Translator};
use crate::nixsyntax::nix_attr;

impl Translator<'_> {
    /// A module output: `module.NAME.OUT` one leaf; of a module called with count or
    /// for_each, `module.NAME[KEY].OUT` that instance's (or, with a key known only inside a
    /// for expression, all instances' as one leaf, then indexed) and `module.NAME[*].OUT` all
    /// instances' as a list.
    pub(super) fn module_ref(&mut self, name: &str, ops: &[TraversalOperator]) -> String {
        let shape = self
            .scope
            .modules
            .get(name)
            .copied()
            .unwrap_or(Shape::Single);
        let base = format!("module.{}", nix_attr(name));
        let output = |op: Option<&TraversalOperator>| match op {
            Some(TraversalOperator::GetAttr(a)) => Some(nix_attr(a.as_str())),
            _ => None,
        };
        if shape == Shape::Single {
            return match output(ops.first()) {
                Some(out) => {
                    let leaf = self.leaf(format!("{base}.outputs.{out}"));
                    self.apply(leaf, &ops[1..])
                }
                None => self.unsupported(&format!("a reference to the whole module {name}")),
            };
        }
        let Some(out) = output(ops.get(1)) else {
            return self.unsupported(&format!(
                "a reference to module.{name} without an instance and an output \
                 (module.{name}[KEY].OUTPUT)"
            ));
        };
        let all = || match shape {
            Shape::Count => {
                format!("(lib.compute (map (i: i.outputs.{out}) {base}) (values: values))")
            }
            _ => format!(
                "(lib.compute (builtins.mapAttrs (_: i: i.outputs.{out}) {base}) (values: values))"
            ),
        };
        match &ops[0] {
            TraversalOperator::LegacyIndex(n) => {
                let leaf = self.leaf(format!("((tf.index {base} {n}).outputs.{out})"));
                self.apply(leaf, &ops[2..])
            }
            TraversalOperator::Index(e) => match self.plain(e) {
                Some(k) => {
                    let leaf = self.leaf(format!("((tf.index {base} ({k})).outputs.{out})"));
                    self.apply(leaf, &ops[2..])
                }
                None => {
                    let leaf = self.leaf(all());
                    let k = self.expr(e);
                    self.apply(format!("(tf.index {leaf} {k})"), &ops[2..])
                }
            },
            TraversalOperator::AttrSplat | TraversalOperator::FullSplat
                if shape == Shape::Count =>
            {
                let leaf = self.leaf(all());
                self.apply(leaf, &ops[2..])
            }
            _ => self.unsupported(&format!(
                "a reference to all instances of module.{name} (index one, or use a splat on a counted one)"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{nix_of, ok, scope};

    #[test]
    fn references_to_module_instances() {
        assert_eq!(
            ok("module.nodes[1].ip"),
            "((tf.index module.nodes (1)).outputs.ip)"
        );
        assert_eq!(
            ok("module.svcs[\"web\"].ip"),
            "((tf.index module.svcs (\"web\")).outputs.ip)"
        );
        assert_eq!(
            ok("module.nodes[*].ip"),
            "(lib.compute (map (i: i.outputs.ip) module.nodes) (values: values))"
        );
        // A key bound by a for expression: all instances' output as one leaf, then indexed.
        let all = ok("[for k in [\"web\"] : module.svcs[k].ip]");
        assert!(
            all.contains("in0 = (lib.compute (builtins.mapAttrs (_: i: i.outputs.ip) module.svcs)"),
            "{all}"
        );
        assert!(all.contains("(tf.index in0 for_k)"), "{all}");
        for refused in ["module.svcs[*].ip", "module.nodes.ip"] {
            let (code, problems) = nix_of(&scope(), refused);
            assert!(code.contains("throw"), "{refused}: {code}");
            assert_eq!(problems.len(), 1, "{refused}: {problems:?}");
        }
    }
}

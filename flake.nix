{
  description = "Nivis: Terraform/OpenTofu providers driven from Nix, phase after phase, to a fixpoint";

  # No inputs: the library and the plans below evaluate with builtins only, so every
  # phase's evaluation stays cheap and works offline.
  outputs = { self }:
    let
      lib = import ./nix;
    in
    {
      # The Nix library: mkProvider, mkResource, mkData, str, compute, drv, count,
      # forEach, byKey, vars, toIR (see nix/default.nix and docs/IR-CONTRACT.md).
      inherit lib;

      # Plans are functions ledger -> IR; the CLI evaluates nivis.plan by default.
      nivis = {
        # Two fake providers, three Nix-mediated hops: applies in three phases.
        plan = import ./nix/examples/two-providers.nix { inherit lib; };
        # The same graph with A.label derived from C.value: a dependency cycle.
        cycle = import ./nix/examples/two-providers.nix { inherit lib; cycle = true; };
      };
    };
}

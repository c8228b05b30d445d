# The package set of the nixpkgs stand-in (see flake.nix). Arguments given to builders are
# kept on the result (`args`), so tests can read what the flake passed.
{ system }:
let
  inherit (builtins) any attrNames filter hasAttr intersectAttrs isFunction isPath functionArgs
    substring stringLength;

  # A derivation that cannot be built, carrying `extra` as attributes.
  stub =
    name: extra:
    derivation {
      inherit name system;
      builder = "/bin/sh";
      args = [
        "-c"
        "echo 'nixpkgs stand-in: ${name} cannot be built' >&2; exit 1"
      ];
    }
    // extra;

  hasPrefix = p: s: substring 0 (stringLength p) s == p;

  lib = {
    importTOML = path: builtins.fromTOML (builtins.readFile path);
    optionalString = cond: s: if cond then s else "";
    licenses.asl20 = {
      spdxId = "Apache-2.0";
    };
    platforms.linux = [
      "x86_64-linux"
      "aarch64-linux"
    ];
    # lib.fileset: a file set is modelled as the list of its roots (files or directories).
    fileset = {
      unions = roots: roots;
      toSource =
        { root, fileset }:
        builtins.path {
          path = root;
          name = "source";
          filter =
            path: type:
            any (
              f:
              let
                f' = toString f;
              in
              path == f' || hasPrefix (f' + "/") path || (type == "directory" && hasPrefix (path + "/") f')
            ) fileset;
        };
    };
  };

  pkgs = {
    inherit lib system;
    stdenv = {
      buildPlatform.canExecute = _: true;
      hostPlatform = {
        inherit system;
      };
    };
    callPackage =
      fn: overrides:
      let
        f = if isPath fn then import fn else fn;
      in
      f (intersectAttrs (functionArgs f) pkgs // overrides);
    rustPlatform.buildRustPackage =
      args:
      stub "${args.pname}-${args.version}" {
        inherit args;
        inherit (args) meta src;
      };
    mkShell = args: stub "nix-shell" { inherit args; };
    runCommand =
      name: env: script:
      stub name {
        args = {
          inherit env script;
        };
      };
    python3.withPackages = f: stub "python3-with-packages" { args = f { jsonschema = stub "jsonschema" { }; }; };
  }
  // builtins.listToAttrs (
    map (name: {
      inherit name;
      value = stub name { };
    }) [ "cmake" "installShellFiles" "clippy" "rustfmt" "rust-analyzer" "nix" "bashInteractive" "groff" "nixfmt" ]
  );
in
pkgs

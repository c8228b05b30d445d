//! `nivis convert terraform` against estates the real Terraform 1.0.3 applied with the real
//! hashicorp/null 2.1.2, offline from a filesystem mirror (as bench/difftest.py drives it):
//! the estate converts, `state list` holds Terraform's managed objects, and `nivis plan
//! --detailed-exitcode` in the written flake finds nothing to change.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::e2e::flake::{copy_flake_source, sealed};
use crate::util::*;

/// A Terraform estate in a temporary directory, with the provider mirror both tools use.
pub(crate) struct Estate {
    pub tmp: tempfile::TempDir,
    pub dir: PathBuf,
    mirror: PathBuf,
    nivis_src: PathBuf,
}

/// A provider the estate's mirror holds: its source below the registry host, the name
/// `real_provider` knows it by, and its version.
pub(crate) struct Mirrored {
    source: &'static str,
    real: &'static str,
    version: &'static str,
}

/// hashicorp/null 2.1.2, which every estate of these tests uses.
const NULL: Mirrored = Mirrored {
    source: "hashicorp/null",
    real: "null",
    version: "2.1.2",
};

/// terraform-lxd/lxd 1.5.0, for the real-LXD scenario.
const LXD: Mirrored = Mirrored {
    source: "terraform-lxd/lxd",
    real: "lxd",
    version: "1.5.0",
};

impl Estate {
    pub(crate) fn new() -> Estate {
        Estate::with(&[NULL])
    }

    /// An estate whose mirror holds `providers` (Terraform's unpacked layout, which Nivis's
    /// `NIVIS_PROVIDER_MIRRORS` reads too).
    pub(crate) fn with(providers: &[Mirrored]) -> Estate {
        let tmp = tempfile::tempdir().unwrap();
        let mirror = tmp.path().join("mirror");
        let mut include = Vec::new();
        for p in providers {
            let binary = real_provider(p.real);
            let address = format!("registry.terraform.io/{}", p.source);
            let target = mirror.join(format!("{address}/{}/linux_amd64", p.version));
            std::fs::create_dir_all(&target).unwrap();
            std::fs::copy(&binary, target.join(binary.file_name().unwrap())).unwrap();
            include.push(format!("{address:?}"));
        }
        std::fs::write(
            tmp.path().join("terraform.tfrc"),
            format!(
                "provider_installation {{\n  filesystem_mirror {{\n    path    = {:?}\n    \
                 include = [{}]\n  }}\n}}\n",
                mirror.display().to_string(),
                include.join(", ")
            ),
        )
        .unwrap();
        let nivis_src = tmp.path().join("nivis-src");
        copy_flake_source(&nivis_src);
        git(&nivis_src, &["init", "-q"]);
        git(&nivis_src, &["add", "-A"]);
        git(&nivis_src, &["commit", "-q", "-m", "src"]);
        let dir = tmp.path().join("terraform");
        std::fs::create_dir_all(&dir).unwrap();
        Estate {
            tmp,
            dir,
            mirror,
            nivis_src,
        }
    }

    pub(crate) fn write(&self, name: &str, text: &str) {
        let path = self.dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    pub(crate) fn terraform(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new(real_provider("terraform"));
        cmd.args(args).current_dir(&self.dir);
        for (k, _) in std::env::vars() {
            if k.starts_with("TF_") {
                cmd.env_remove(k);
            }
        }
        cmd.env("TF_CLI_CONFIG_FILE", self.tmp.path().join("terraform.tfrc"))
            .env("CHECKPOINT_DISABLE", "1")
            .env("TF_IN_AUTOMATION", "1")
            .env("HOME", self.tmp.path());
        cmd.output().unwrap()
    }

    /// `terraform init` and `apply`.
    pub(crate) fn apply(&self) {
        self.apply_with(&[]);
    }

    /// `terraform init` and `apply EXTRA...` (`-var-file=...`).
    pub(crate) fn apply_with(&self, extra: &[&str]) {
        let init = self.terraform(&["init", "-input=false", "-no-color"]);
        assert_success(&init);
        let mut args = vec!["apply", "-auto-approve", "-input=false", "-no-color"];
        args.extend_from_slice(extra);
        assert_success(&self.terraform(&args));
    }

    /// The Nivis state file of the converted project.
    pub(crate) fn state(&self) -> PathBuf {
        self.tmp.path().join("nivis.state.json")
    }

    /// `nivis ARGS` in `cwd`, offline, with the estate's mirror and the Nivis state file.
    pub(crate) fn nivis(&self, cwd: &Path, args: &[&str]) -> Output {
        let mut cmd = Command::new(nivis_bin());
        cmd.args(args)
            .current_dir(cwd)
            .env("NIVIS_PROVIDER_MIRRORS", &self.mirror)
            .env("NIVIS_OFFLINE", "1")
            .env("NIVIS_STATE", self.state())
            .env("NIVIS_PROVIDER_CACHE_DIR", self.tmp.path().join("cache"))
            .env("HOME", self.tmp.path())
            .env_remove("NIVIS_LOCK_FILE")
            .env_remove("NIVIS_LOG");
        sealed(&mut cmd, self.tmp.path());
        cmd.output().unwrap()
    }

    /// `nivis convert terraform DIR --out OUT` with this Nivis as the flake's input.
    pub(crate) fn convert(&self, dir: &Path, out: &Path, extra: &[&str]) -> Output {
        let src = format!("git+file://{}", self.nivis_src.display());
        let mut args = vec![
            "convert",
            "terraform",
            dir.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--nivis-src",
            &src,
        ];
        args.extend_from_slice(extra);
        self.nivis(self.tmp.path(), &args)
    }

    pub(crate) fn out(&self) -> PathBuf {
        self.tmp.path().join("converted")
    }

    /// `state list` of the converted project.
    pub(crate) fn state_list(&self) -> Vec<String> {
        let out = self.out();
        let listed = self.nivis(&out, &["state", "list"]);
        assert_success(&listed);
        stdout(&listed).lines().map(str::to_string).collect()
    }

    /// Asserts `nivis plan --detailed-exitcode` in OUT exits 0.
    pub(crate) fn assert_plans_no_changes(&self) {
        let out = self.out();
        let plan = self.nivis(&out, &["plan", "--detailed-exitcode"]);
        assert!(
            plan.status.code() == Some(0),
            "plan in the converted flake: {:?}\n{}\n{}",
            plan.status,
            stdout(&plan),
            stderr(&plan)
        );
    }

    /// `convert DIR --out OUT EXTRA...`, which must succeed.
    fn convert_ok(&self, dir: &Path, extra: &[&str]) -> Output {
        let out = self.convert(dir, &self.out(), extra);
        assert!(
            out.status.success(),
            "convert: {:?}\n{}\n{}",
            out.status,
            stdout(&out),
            stderr(&out)
        );
        out
    }

    /// Converts, checks the proof, the recorded ids and a second plan.
    fn converts_exactly(&self, expected_ids: &[&str]) -> Output {
        let out = self.converts_exactly_with(&[], expected_ids);
        self.assert_plans_no_changes();
        out
    }

    /// Converts with `convert`'s EXTRA arguments, checks the proof, that the Terraform state
    /// was only read and the recorded ids; returns convert's output.
    fn converts_exactly_with(&self, extra: &[&str], expected_ids: &[&str]) -> Output {
        let tf_state = std::fs::read(self.dir.join("terraform.tfstate")).unwrap();
        let out = self.convert_ok(&self.dir, extra);
        assert!(stdout(&out).contains("Adopted exactly"), "{}", stdout(&out));
        assert_eq!(
            std::fs::read(self.dir.join("terraform.tfstate")).unwrap(),
            tf_state,
            "the Terraform state is only read"
        );
        let mut ids = self.state_list();
        ids.sort();
        assert_eq!(ids, expected_ids);
        out
    }
}

/// The estate of the issue: a variable, count, for_each over a map, references and
/// interpolations, the listed functions, a data source, depends_on, lifecycle and an output.
const MAIN_TF: &str = r#"
terraform {
  required_providers {
    null = { source = "hashicorp/null", version = "2.1.2" }
  }
}
variable "prefix" {
  type    = string
  default = "web"
}
variable "services" {
  type    = map(string)
  default = { api = "8080", ui = "3000" }
}
locals {
  label = upper(var.prefix)
  tags  = merge({ team = "ops" }, { env = lower("PROD") })
}
resource "null_resource" "node" {
  count = 2
  triggers = {
    name  = format("%s-%d", var.prefix, count.index)
    label = "${local.label}/${lookup(local.tags, "env", "none")}"
  }
}
resource "null_resource" "svc" {
  for_each = var.services
  triggers = {
    port  = each.value
    key   = each.key
    after = null_resource.node[0].id
    all   = join(",", null_resource.node[*].id)
    pick  = element(concat(keys(var.services), values(var.services)), 3)
  }
}
data "null_data_source" "info" {
  inputs = { first = "node-${null_resource.node[1].id}" }
}
resource "null_resource" "tail" {
  triggers = {
    from  = data.null_data_source.info.outputs["first"]
    n     = tostring(length(keys(var.services)))
    kind  = length(var.services) > 1 ? "many" : "one"
    name  = coalesce("", replace(var.prefix, "w", "W"))
    ports = join("+", [for k, v in var.services : "${k}=${v}" if v != ""])
    keys  = join(",", keys({ for k, v in var.services : upper(k) => v }))
  }
  depends_on = [null_resource.svc]
  lifecycle {
    create_before_destroy = true
    ignore_changes        = [triggers["ignored"]]
  }
}
output "tail_id" { value = null_resource.tail.id }
"#;

const IDS: [&str; 5] = [
    "null.null_resource.node__0",
    "null.null_resource.node__1",
    "null.null_resource.svc__api",
    "null.null_resource.svc__ui",
    "null.null_resource.tail",
];

#[test]
fn a_tf_estate_converts_and_plans_no_changes() {
    let e = Estate::new();
    e.write("main.tf", MAIN_TF);
    e.apply();
    e.converts_exactly(&IDS);
    let main = std::fs::read_to_string(e.out().join("main.nix")).unwrap();
    assert!(main.contains("lib.count"), "{main}");
    assert!(main.contains("lib.forEach"), "{main}");
    assert!(!main.contains("throw"), "{main}");
}

/// What a terranix flake generates for the same estate (Terraform's JSON syntax).
const MAIN_TF_JSON: &str = r#"{
  "terraform": {"required_providers": {"null": {"source": "hashicorp/null", "version": "2.1.2"}}},
  "variable": {
    "prefix": {"type": "string", "default": "web"},
    "services": {"type": "map(string)", "default": {"api": "8080", "ui": "3000"}}
  },
  "locals": {"label": "${upper(var.prefix)}"},
  "resource": {"null_resource": {
    "node": {"count": 2, "triggers": {"name": "${format(\"%s-%d\", var.prefix, count.index)}", "label": "${local.label}"}},
    "svc": {"for_each": "${var.services}",
            "triggers": {"port": "${each.value}", "after": "${null_resource.node[0].id}",
                         "all": "${join(\",\", null_resource.node[*].id)}", "cost": "$${not interpolated}"}},
    "tail": {"triggers": {"from": "${data.null_data_source.info.outputs[\"first\"]}"},
             "depends_on": ["null_resource.svc"],
             "lifecycle": {"create_before_destroy": true}}
  }},
  "data": {"null_data_source": {"info": {"inputs": {"first": "node-${null_resource.node[1].id}"}}}},
  "output": {"tail_id": {"value": "${null_resource.tail.id}"}}
}"#;

#[test]
fn a_terranix_tf_json_estate_converts_and_plans_no_changes() {
    let e = Estate::new();
    e.write("config.tf.json", MAIN_TF_JSON);
    e.apply();
    e.converts_exactly(&IDS);
}

#[test]
fn an_estate_with_a_local_module_converts_and_plans_no_changes() {
    let e = Estate::new();
    e.write(
        "main.tf",
        r#"
variable "names" {
  type    = list(string)
  default = ["a", "b"]
}
resource "null_resource" "base" {
  triggers = { v = "base" }
}
module "app" {
  source = "./modules/app"
  name   = "web-${null_resource.base.id}"
  names  = var.names
}
resource "null_resource" "after" {
  triggers = { app = module.app.id }
}
output "app" { value = module.app.id }
"#,
    );
    e.write(
        "modules/app/main.tf",
        r#"
variable "name" { type = string }
variable "names" { type = list(string) }
variable "unused" {
  type    = string
  default = "d"
}
resource "null_resource" "one" {
  triggers = { name = var.name, d = var.unused }
}
resource "null_resource" "each" {
  for_each = toset(var.names)
  triggers = { n = each.key, one = null_resource.one.id }
}
output "id" { value = null_resource.one.id }
"#,
    );
    e.apply();
    e.converts_exactly(&[
        "null.null_resource.after",
        "null.null_resource.app--each__a",
        "null.null_resource.app--each__b",
        "null.null_resource.app--one",
        "null.null_resource.base",
    ]);
}

/// A local module called with `count` and with `for_each`: each instance's objects are named
/// with the flat prefix `NAME__KEY--` (DESIGN §99), references to one instance, to all of a
/// counted one and a `depends_on` on a module all translate.
#[test]
fn modules_called_with_count_and_for_each_convert_and_plan_no_changes() {
    let e = Estate::new();
    e.write(
        "main.tf",
        r#"
module "node" {
  count  = 2
  source = "./modules/node"
  name   = "node-${count.index}"
}
module "svc" {
  for_each = { api = "8080", ui = "3000" }
  source   = "./modules/node"
  name     = "${each.key}:${each.value}"
}
module "tag" {
  for_each = toset(["x"])
  source   = "./modules/node"
  name     = each.value
}
resource "null_resource" "after" {
  triggers = {
    first = module.node[0].id
    all   = join(",", module.node[*].id)
    api   = module.svc["api"].id
  }
  depends_on = [module.svc]
}
"#,
    );
    e.write(
        "modules/node/main.tf",
        r#"
variable "name" { type = string }
resource "null_resource" "one" {
  triggers = { name = var.name }
}
output "id" { value = null_resource.one.id }
"#,
    );
    e.apply();
    e.converts_exactly(&[
        "null.null_resource.after",
        "null.null_resource.node__0--one",
        "null.null_resource.node__1--one",
        "null.null_resource.svc__api--one",
        "null.null_resource.svc__ui--one",
        "null.null_resource.tag__x--one",
    ]);
    let main = std::fs::read_to_string(e.out().join("main.nix")).unwrap();
    assert!(!main.contains("throw"), "{main}");
}

/// Variable values from Terraform's variable files (terraform.tfvars, *.auto.tfvars.json and a
/// `-var-file`, later winning) become the flake's defaults; a sensitive one stays out of the
/// Nix and reaches only the proof plan.
#[test]
fn variable_files_carry_into_the_flake_and_a_sensitive_value_stays_out() {
    let e = Estate::new();
    e.write(
        "main.tf",
        r#"
variable "prefix" {
  type    = string
  default = "declared"
}
variable "n" { type = number }
variable "tags" { type = map(string) }
variable "token" {
  type      = string
  sensitive = true
}
resource "null_resource" "node" {
  count    = var.n
  triggers = { name = "${var.prefix}-${count.index}", team = var.tags["team"] }
}
resource "null_resource" "t" {
  triggers = { token = var.token }
}
"#,
    );
    e.write(
        "terraform.tfvars",
        "prefix = \"tfvars\"\nn = 2\ntoken = \"s3cret-token-value\"\n",
    );
    e.write("a.auto.tfvars.json", r#"{"tags": {"team": "ops"}}"#);
    e.write("extra.tfvars", "prefix = \"extra\"\n");
    e.apply_with(&["-var-file=extra.tfvars"]);
    let extra = e.dir.join("extra.tfvars");
    let out = e.converts_exactly_with(
        &["--tf-var-file", extra.to_str().unwrap()],
        &[
            "null.null_resource.node__0",
            "null.null_resource.node__1",
            "null.null_resource.t",
        ],
    );
    assert!(
        stderr(&out).contains("NIVIS_VAR_token"),
        "how to give the sensitive value: {}",
        stderr(&out)
    );
    let flake = std::fs::read_to_string(e.out().join("flake.nix")).unwrap();
    assert!(
        flake.contains("default = \"extra\"; }; # the value of extra.tfvars"),
        "{flake}"
    );
    assert!(
        flake.contains("default = 2; }; # the value of terraform.tfvars"),
        "{flake}"
    );
    assert!(
        flake.contains("# the value of a.auto.tfvars.json"),
        "{flake}"
    );
    for f in ["flake.nix", "main.nix"] {
        let text = std::fs::read_to_string(e.out().join(f)).unwrap();
        assert!(!text.contains("s3cret-token-value"), "{f}: {text}");
    }
    assert!(!stdout(&out).contains("s3cret-token-value"));
    assert!(!stderr(&out).contains("s3cret-token-value"));
}

/// A Terraform `s3` backend: the flake holds the equivalent `nivis.backend`, commented out
/// (the state convert records stays local), with a key of its own beside Terraform's, and the
/// notes say what to do and what did not carry over.
#[test]
fn an_s3_backend_is_written_as_the_commented_nivis_backend() {
    let e = Estate::new();
    e.write("main.tf", "resource \"null_resource\" \"a\" {}\n");
    e.apply();
    // Added after the apply: this Terraform never talks to a bucket; convert reads files only.
    e.write(
        "backend.tf",
        r#"
terraform {
  backend "s3" {
    bucket         = "team-state"
    key            = "infra/terraform.tfstate"
    region         = "eu-west-1"
    dynamodb_table = "locks"
  }
}
"#,
    );
    let out = e.converts_exactly_with(&[], &["null.null_resource.a"]);
    let flake = std::fs::read_to_string(e.out().join("flake.nix")).unwrap();
    assert!(
        flake.contains(
            "# nivis.backend = { type = \"s3\"; bucket = \"team-state\"; key = \
             \"infra/terraform.nivis.state\"; region = \"eu-west-1\"; };"
        ),
        "{flake}"
    );
    let notes = stderr(&out);
    assert!(notes.contains("nivis state migrate"), "{notes}");
    assert!(notes.contains("`dynamodb_table`"), "{notes}");
}

#[test]
fn a_state_alone_converts_to_literals_and_plans_no_changes() {
    let e = Estate::new();
    e.write("main.tf", MAIN_TF);
    e.apply();
    // Only the state and the lock file, as `terraform state pull` gives them.
    let alone = e.tmp.path().join("state-only");
    std::fs::create_dir_all(&alone).unwrap();
    let pulled = e.tmp.path().join("pulled.tfstate");
    std::fs::copy(e.dir.join("terraform.tfstate"), &pulled).unwrap();
    std::fs::copy(
        e.dir.join(".terraform.lock.hcl"),
        alone.join(".terraform.lock.hcl"),
    )
    .unwrap();
    e.convert_ok(&alone, &["--tfstate", pulled.to_str().unwrap()]);
    let mut ids = e.state_list();
    ids.sort();
    assert_eq!(ids, IDS);
    let main = std::fs::read_to_string(e.out().join("main.nix")).unwrap();
    assert!(
        main.contains("\"web-1\""),
        "the recorded trigger as a literal: {main}"
    );
    e.assert_plans_no_changes();
}

#[test]
fn an_untranslatable_construct_is_a_marked_throw_and_fails() {
    let e = Estate::new();
    e.write(
        "main.tf",
        r#"
resource "null_resource" "net" {
  triggers = { cidr = cidrsubnet("10.0.0.0/8", 8, 1), plain = "kept" }
}
"#,
    );
    e.apply();
    let out = e.convert(&e.dir, &e.out(), &[]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    let text = stdout(&out);
    assert!(
        text.contains("null_resource.net.triggers.cidr: the function cidrsubnet()"),
        "{text}"
    );
    let main = std::fs::read_to_string(e.out().join("main.nix")).unwrap();
    assert!(
        main.contains(
            "throw \"convert: null_resource.net.triggers.cidr: the function cidrsubnet()"
        ),
        "{main}"
    );
    // The objects are recorded all the same; the plan fails at the throw, naming it.
    assert_eq!(e.state_list(), ["null.null_resource.net"]);
    let plan = e.nivis(&e.out(), &["plan"]);
    assert!(!plan.status.success());
    assert!(stderr(&plan).contains("cidrsubnet"), "{}", stderr(&plan));
}

#[test]
fn a_state_of_another_format_version_is_refused_and_nothing_is_written() {
    let e = Estate::new();
    e.write(
        "terraform.tfstate",
        r#"{"version": 3, "serial": 1, "modules": []}"#,
    );
    let out = e.convert(&e.dir, &e.out(), &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("state format version 3"),
        "{}",
        stderr(&out)
    );
    assert!(!e.out().exists(), "nothing is written for a refused estate");
}

/// The real-LXD scenario (tests/lxd/scenario.nix) as Terraform writes it: a storage pool,
/// volumes by `for_each`, a bridge network, two profiles, two running containers and a
/// snapshot, and a profile whose config reads a container's `status` and the snapshot's
/// `created_at` (known only after their apply). `socket` and `pool_dir` are the daemon's.
fn lxd_estate_tf(socket: &str, pool_dir: &str) -> String {
    format!(
        r#"
terraform {{
  required_providers {{
    lxd = {{ source = "terraform-lxd/lxd", version = "1.5.0" }}
  }}
}}
variable "socket" {{
  type    = string
  default = {socket:?}
}}
variable "pool_dir" {{
  type    = string
  default = {pool_dir:?}
}}
variable "role" {{
  type    = string
  default = "web"
}}
provider "lxd" {{
  lxd_remote {{
    name    = "test"
    scheme  = "unix"
    address = var.socket
    default = true
  }}
}}
resource "lxd_storage_pool" "extra" {{
  name   = "extra"
  driver = "dir"
  config = {{ source = var.pool_dir }}
}}
resource "lxd_volume" "disk" {{
  for_each = toset(["data", "logs"])
  name     = each.key
  pool     = lxd_storage_pool.extra.name
}}
resource "lxd_volume" "cache" {{
  name = "cache"
  pool = "default"
}}
resource "lxd_network" "br" {{
  name = "nivisbr0"
  config = {{
    "ipv4.address"  = "none"
    "ipv6.address"  = "none"
    "ipv4.firewall" = "false"
    "ipv6.firewall" = "false"
  }}
}}
resource "lxd_profile" "base" {{
  name   = "base"
  config = {{ "user.role" = var.role }}
  device {{
    name       = "eth0"
    type       = "nic"
    properties = {{ nictype = "bridged", parent = lxd_network.br.name }}
  }}
}}
resource "lxd_container" "app" {{
  for_each         = {{ web = "data", worker = "logs" }}
  name             = each.key
  image            = "busybox"
  profiles         = ["default", lxd_profile.base.name]
  wait_for_network = false
  device {{
    name = each.value
    type = "disk"
    properties = {{
      path   = "/${{each.value}}"
      source = lxd_volume.disk[each.value].name
      pool   = lxd_storage_pool.extra.name
    }}
  }}
}}
resource "lxd_snapshot" "first" {{
  name           = "first"
  container_name = lxd_container.app["web"].name
}}
resource "lxd_profile" "observed" {{
  name = "observed"
  config = {{
    "user.web-status"     = lxd_container.app["web"].status
    "user.snapshot-taken" = lxd_snapshot.first.created_at
  }}
}}
output "web_status" {{ value = lxd_container.app["web"].status }}
"#
    )
}

/// The real-LXD scenario applied by the real Terraform with terraform-provider-lxd 1.5.0,
/// converted, proved by a plan with no changes, then changed in the converted Nix and applied
/// by Nivis; each step checked in what LXD says.
#[test]
fn the_real_lxd_scenario_applied_by_terraform_converts_and_plans_no_changes() {
    let lxd = super::real_lxd::Lxd::start();
    let e = Estate::with(&[LXD]);
    e.write(
        "main.tf",
        &lxd_estate_tf(&lxd.socket(), &lxd.scratch("pool-extra")),
    );
    e.apply();
    let running = |n: &str| (n.to_string(), "Running".to_string());
    assert_eq!(lxd.instances(), vec![running("web"), running("worker")]);
    let web = lxd.query("/1.0/instances/web");
    let before = web["created_at"].clone();
    e.converts_exactly(&[
        "lxd.lxd_container.app__web",
        "lxd.lxd_container.app__worker",
        "lxd.lxd_network.br",
        "lxd.lxd_profile.base",
        "lxd.lxd_profile.observed",
        "lxd.lxd_snapshot.first",
        "lxd.lxd_storage_pool.extra",
        "lxd.lxd_volume.cache",
        "lxd.lxd_volume.disk__data",
        "lxd.lxd_volume.disk__logs",
    ]);

    // A change made in the converted Nix, applied by Nivis: in place, nothing re-created.
    let flake = e.out().join("flake.nix");
    let text = std::fs::read_to_string(&flake).unwrap();
    assert_eq!(text.matches("default = \"web\";").count(), 1, "{text}");
    std::fs::write(
        &flake,
        text.replace("default = \"web\";", "default = \"db\";"),
    )
    .unwrap();
    let plan = e.nivis(&e.out(), &["plan"]);
    assert_success(&plan);
    assert!(
        stdout(&plan).contains("~ lxd.lxd_profile.base"),
        "{}",
        stdout(&plan)
    );
    assert!(
        stdout(&plan).contains("Plan: 0 to create, 1 to update, 0 to replace, 0 to destroy"),
        "{}",
        stdout(&plan)
    );
    assert_success(&e.nivis(&e.out(), &["apply", "--auto-approve"]));
    assert_eq!(lxd.query("/1.0/profiles/base")["config"]["user.role"], "db");
    assert_eq!(lxd.query("/1.0/instances/web")["created_at"], before);
    assert_eq!(lxd.instances(), vec![running("web"), running("worker")]);
    e.assert_plans_no_changes();
}

//! Provider addresses, versions, version constraints and platforms.
//!
//! Owns the parsing and normalisation of `[HOST/]NAMESPACE/TYPE`, semantic versions with their
//! precedence order, the constraint syntax of `required_providers` (`>= 1.2, ~> 1.2.3, != 1.3.0`)
//! and `OS_ARCH` platform names. Pure functions only: no I/O, no knowledge of where packages live.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

/// Why a provider address, version, constraint or platform string does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotationError {
    /// The address has neither two nor three `/`-separated parts.
    AddressParts {
        /// How many parts it has.
        found: usize,
    },
    /// The type part starts with `terraform-provider-`.
    TypePrefix {
        /// The type without the prefix, what the user meant.
        short: String,
    },
    /// The host part is empty.
    EmptyHost,
    /// The host part opens `[` and never closes it.
    UnclosedBracket {
        /// The host as written.
        raw: String,
    },
    /// The host's `:port` is not a port number from 1 to 65535.
    BadPort {
        /// The host as written.
        raw: String,
    },
    /// The host has characters a host name cannot have.
    BadHost {
        /// The host as written.
        raw: String,
    },
    /// The namespace or type has characters other than letters, digits, `-` and `_`.
    BadPart {
        /// Which part: `namespace` or `type`.
        what: &'static str,
        /// The part as written.
        raw: String,
    },
    /// The version is not `MAJOR[.MINOR[.PATCH]][-PRE][+BUILD]`.
    BadVersion {
        /// The version as written.
        input: String,
    },
    /// The version leaves out the minor or patch number where a full version is needed.
    PartialVersion {
        /// The version as written.
        input: String,
    },
    /// A constraint clause has an operator and no version.
    ClauseWithoutVersion {
        /// The whole constraint.
        constraint: String,
        /// The clause.
        clause: String,
    },
    /// A constraint clause's version does not parse.
    ConstraintVersion {
        /// The whole constraint.
        constraint: String,
        /// Why the version does not parse.
        cause: Box<NotationError>,
    },
    /// The platform is not `OS_ARCH` in lowercase.
    BadPlatform {
        /// The platform as written.
        input: String,
    },
}

impl fmt::Display for NotationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotationError::AddressParts { found } => write!(
                f,
                "expected NAMESPACE/TYPE or HOSTNAME/NAMESPACE/TYPE, found {found} part(s)"
            ),
            NotationError::TypePrefix { short } => write!(
                f,
                "the provider type must not include the \"terraform-provider-\" prefix: use {short:?}"
            ),
            NotationError::EmptyHost => f.write_str("empty hostname"),
            NotationError::UnclosedBracket { raw } => {
                write!(f, "invalid hostname {raw:?}: unclosed '['")
            }
            NotationError::BadPort { raw } => write!(f, "invalid port in hostname {raw:?}"),
            NotationError::BadHost { raw } => write!(f, "invalid hostname {raw:?}"),
            NotationError::BadPart { what, raw } => write!(
                f,
                "invalid provider {what} {raw:?}: use letters, digits, '-' and '_', not at the ends"
            ),
            NotationError::BadVersion { input } => write!(f, "invalid version {input:?}"),
            NotationError::PartialVersion { input } => {
                write!(f, "invalid version {input:?}: expected MAJOR.MINOR.PATCH")
            }
            NotationError::ClauseWithoutVersion { constraint, clause } => write!(
                f,
                "invalid version constraint {constraint:?}: clause {clause:?} has no version"
            ),
            NotationError::ConstraintVersion { constraint, cause } => {
                write!(f, "invalid version constraint {constraint:?}: {cause}")
            }
            NotationError::BadPlatform { input } => write!(
                f,
                "invalid platform {input:?}: expected OS_ARCH in lowercase, e.g. linux_amd64"
            ),
        }
    }
}

impl std::error::Error for NotationError {}

/// The registry host used when an address names only `NAMESPACE/TYPE`.
pub(crate) const DEFAULT_HOST: &str = "registry.opentofu.org";

/// A normalised provider address: lowercase host (with optional `:port`), namespace and type.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProviderAddr {
    /// Registry host in display form, lowercase, e.g. `registry.opentofu.org` or `127.0.0.1:8080`.
    pub(crate) host: String,
    /// Namespace (organisation), lowercase.
    pub(crate) namespace: String,
    /// Provider type, lowercase; the binary is `terraform-provider-TYPE…`.
    pub(crate) type_: String,
}

impl ProviderAddr {
    /// Parses `[HOST/]NAMESPACE/TYPE`, normalising case; the host defaults to
    /// [`DEFAULT_HOST`].
    pub(crate) fn parse(source: &str) -> Result<ProviderAddr, NotationError> {
        let parts: Vec<&str> = source.split('/').collect();
        let (host, ns, ty) = match parts.as_slice() {
            [ns, ty] => (DEFAULT_HOST.to_string(), *ns, *ty),
            [host, ns, ty] => (parse_host(host)?, *ns, *ty),
            _ => return Err(NotationError::AddressParts { found: parts.len() }),
        };
        let namespace = parse_part(ns, "namespace")?;
        let type_ = parse_part(ty, "type")?;
        if let Some(short) = type_.strip_prefix("terraform-provider-") {
            return Err(NotationError::TypePrefix {
                short: short.to_string(),
            });
        }
        Ok(ProviderAddr {
            host,
            namespace,
            type_,
        })
    }

    /// The path of this provider below a mirror or cache root: `HOST/NAMESPACE/TYPE`.
    pub(crate) fn rel_path(&self) -> std::path::PathBuf {
        [&self.host, &self.namespace, &self.type_].iter().collect()
    }

    /// Whether the host is a loopback address (`127.x.y.z`, `localhost`, `[::1]`).
    #[cfg(test)] // used by the unit tests only
    pub(crate) fn host_is_loopback(&self) -> bool {
        host_is_loopback(&self.host)
    }
}

impl fmt::Display for ProviderAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.host, self.namespace, self.type_)
    }
}

impl FromStr for ProviderAddr {
    type Err = NotationError;
    fn from_str(s: &str) -> Result<Self, NotationError> {
        ProviderAddr::parse(s)
    }
}

/// Whether `host` (optionally with `:port`) names the local machine.
pub(crate) fn host_is_loopback(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or("")
    } else {
        host.rsplit_once(':').map_or(host, |(h, _)| h)
    };
    name == "localhost"
        || name == "::1"
        || name
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn parse_host(raw: &str) -> Result<String, NotationError> {
    if raw.is_empty() {
        return Err(NotationError::EmptyHost);
    }
    let host = raw.to_lowercase();
    let (name, port) = if let Some(rest) = host.strip_prefix('[') {
        let (ip, after) = rest
            .split_once(']')
            .ok_or_else(|| NotationError::UnclosedBracket { raw: raw.into() })?;
        (ip.to_string(), after.strip_prefix(':'))
    } else {
        match host.rsplit_once(':') {
            Some((n, p)) => (n.to_string(), Some(p)),
            None => (host.clone(), None),
        }
    };
    if let Some(p) = port {
        if p.parse::<u16>().map_or(true, |p| p == 0) {
            return Err(NotationError::BadPort { raw: raw.into() });
        }
    }
    let ok = !name.is_empty()
        && name.chars().all(|c| {
            c.is_alphanumeric() || c == '-' || c == '.' || (host.starts_with('[') && c == ':')
        })
        && !name.starts_with(['-', '.'])
        && !name.ends_with(['-', '.']);
    if !ok {
        return Err(NotationError::BadHost { raw: raw.into() });
    }
    Ok(host)
}

fn parse_part(raw: &str, what: &'static str) -> Result<String, NotationError> {
    let ok = !raw.is_empty()
        && raw
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        && !raw.starts_with(['-', '_'])
        && !raw.ends_with(['-', '_']);
    if ok {
        Ok(raw.to_ascii_lowercase())
    } else {
        Err(NotationError::BadPart {
            what,
            raw: raw.into(),
        })
    }
}

/// Whether `source` is a registry address rather than a filesystem path: it has two or three
/// `/`-separated parts that parse as [`ProviderAddr`] and does not start like a path (`/`,
/// `./`, `../`, `~`), and a three-part address has a host that looks like one (contains `.` or
/// `:`, or is `localhost`). Write relative paths to binaries as `./path`.
pub(crate) fn is_registry_address(source: &str) -> bool {
    if source.starts_with(['/', '.', '~']) || ProviderAddr::parse(source).is_err() {
        return false;
    }
    match source.split('/').collect::<Vec<_>>().as_slice() {
        [host, _, _] => host.contains(['.', ':']) || host.eq_ignore_ascii_case("localhost"),
        _ => true,
    }
}

/// A semantic version `MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD]`, ordered by semver precedence
/// (build metadata ignored for ordering and equality).
#[derive(Debug, Clone)]
pub struct Version {
    /// Major number.
    pub(crate) major: u64,
    /// Minor number.
    pub(crate) minor: u64,
    /// Patch number.
    pub(crate) patch: u64,
    /// Dot-separated prerelease identifiers; empty for a release.
    pub(crate) pre: Vec<String>,
    /// Build metadata, without the `+`; empty if none.
    pub(crate) build: String,
}

impl Version {
    /// Parses a full version; a leading `v` is accepted.
    pub(crate) fn parse(s: &str) -> Result<Version, NotationError> {
        let p = Partial::parse(s)?;
        match (p.minor, p.patch) {
            (Some(minor), Some(patch)) => Ok(Version {
                major: p.major,
                minor,
                patch,
                pre: p.pre,
                build: p.build,
            }),
            _ => Err(NotationError::PartialVersion { input: s.into() }),
        }
    }

    /// Whether this is a prerelease (`1.0.0-beta1`).
    pub(crate) fn is_prerelease(&self) -> bool {
        !self.pre.is_empty()
    }

    fn triple(&self) -> (u64, u64, u64) {
        (self.major, self.minor, self.patch)
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)?;
        if !self.pre.is_empty() {
            write!(f, "-{}", self.pre.join("."))?;
        }
        if !self.build.is_empty() {
            write!(f, "+{}", self.build)?;
        }
        Ok(())
    }
}

impl FromStr for Version {
    type Err = NotationError;
    fn from_str(s: &str) -> Result<Self, NotationError> {
        Version::parse(s)
    }
}

impl PartialEq for Version {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Version {}
impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        self.triple()
            .cmp(&other.triple())
            .then_with(|| cmp_pre(&self.pre, &other.pre))
    }
}

/// Semver §11: a release ranks above its prereleases; identifiers compare numerically when
/// both are numeric, numeric ranks below alphanumeric, a shorter prefix ranks lower.
fn cmp_pre(a: &[String], b: &[String]) -> Ordering {
    match (a.is_empty(), b.is_empty()) {
        (true, true) => return Ordering::Equal,
        (true, false) => return Ordering::Greater,
        (false, true) => return Ordering::Less,
        _ => {}
    }
    for (x, y) in a.iter().zip(b) {
        let o = match (x.parse::<u64>(), y.parse::<u64>()) {
            (Ok(m), Ok(n)) => m.cmp(&n),
            (Ok(_), Err(_)) => Ordering::Less,
            (Err(_), Ok(_)) => Ordering::Greater,
            (Err(_), Err(_)) => x.cmp(y),
        };
        if o != Ordering::Equal {
            return o;
        }
    }
    a.len().cmp(&b.len())
}

/// A version as written in a constraint, where minor and patch may be left out.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Partial {
    major: u64,
    minor: Option<u64>,
    patch: Option<u64>,
    pre: Vec<String>,
    build: String,
}

impl Partial {
    fn parse(s: &str) -> Result<Partial, NotationError> {
        let t = s.strip_prefix('v').unwrap_or(s);
        let (t, build) = match t.split_once('+') {
            Some((a, b)) => (a, b.to_string()),
            None => (t, String::new()),
        };
        let (core, pre) = match t.split_once('-') {
            Some((a, b)) => (a, b.split('.').map(str::to_string).collect::<Vec<_>>()),
            None => (t, Vec::new()),
        };
        let bad = || NotationError::BadVersion { input: s.into() };
        let ident_ok =
            |i: &String| !i.is_empty() && i.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
        if !pre.iter().all(ident_ok)
            || (!build.is_empty() && !build.split('.').all(|b| ident_ok(&b.to_string())))
        {
            return Err(bad());
        }
        let nums: Vec<&str> = core.split('.').collect();
        if nums.is_empty() || nums.len() > 3 {
            return Err(bad());
        }
        let num = |n: &str| -> Result<u64, NotationError> {
            if n.is_empty()
                || !n.chars().all(|c| c.is_ascii_digit())
                || (n.len() > 1 && n.starts_with('0'))
            {
                return Err(bad());
            }
            n.parse::<u64>().map_err(|_| bad())
        };
        let major = num(nums[0])?;
        let minor = nums.get(1).map(|n| num(n)).transpose()?;
        let patch = nums.get(2).map(|n| num(n)).transpose()?;
        if patch.is_none() && !pre.is_empty() {
            return Err(bad());
        }
        Ok(Partial {
            major,
            minor,
            patch,
            pre,
            build,
        })
    }

    fn zero_filled(&self) -> Version {
        Version {
            major: self.major,
            minor: self.minor.unwrap_or(0),
            patch: self.patch.unwrap_or(0),
            pre: self.pre.clone(),
            build: String::new(),
        }
    }

    /// `=` with missing parts matches any value there (`= 1.2` matches `1.2.7`).
    fn matches_exactly(&self, v: &Version) -> bool {
        self.major == v.major
            && self.minor.is_none_or(|m| m == v.minor)
            && self.patch.is_none_or(|p| p == v.patch)
            && (self.patch.is_none() || self.pre == v.pre)
    }
}

impl fmt::Display for Partial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.major)?;
        if let Some(m) = self.minor {
            write!(f, ".{m}")?;
        }
        if let Some(p) = self.patch {
            write!(f, ".{p}")?;
        }
        if !self.pre.is_empty() {
            write!(f, "-{}", self.pre.join("."))?;
        }
        if !self.build.is_empty() {
            write!(f, "+{}", self.build)?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
    Pessimistic,
}

impl Op {
    fn as_str(self) -> &'static str {
        match self {
            Op::Eq => "=",
            Op::Ne => "!=",
            Op::Gt => ">",
            Op::Ge => ">=",
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Pessimistic => "~>",
        }
    }
}

/// A version constraint: comma-separated clauses `OP VERSION`, all of which must hold.
///
/// Operators: `=` (also a bare version), `!=`, `>`, `>=`, `<`, `<=`, `~>`. Missing minor or
/// patch parts are zeros for ordering operators and wildcards for `=`/`!=`; `~> 1.2` allows
/// `>= 1.2.0, < 2.0.0`, `~> 1.2.3` allows `>= 1.2.3, < 1.3.0`. A prerelease is selected only by
/// a clause that names it exactly. The empty constraint allows every release.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Constraint {
    clauses: Vec<(Op, Partial)>,
}

impl Constraint {
    /// Parses a constraint string; the empty string allows every release.
    pub(crate) fn parse(s: &str) -> Result<Constraint, NotationError> {
        let mut clauses = Vec::new();
        if s.trim().is_empty() {
            return Ok(Constraint { clauses });
        }
        for raw in s.split(',') {
            let c = raw.trim();
            let (op, rest) = [
                ("~>", Op::Pessimistic),
                (">=", Op::Ge),
                ("<=", Op::Le),
                ("!=", Op::Ne),
                (">", Op::Gt),
                ("<", Op::Lt),
                ("=", Op::Eq),
            ]
            .iter()
            .find_map(|(p, op)| c.strip_prefix(p).map(|r| (*op, r)))
            .unwrap_or((Op::Eq, c));
            let rest = rest.trim();
            if rest.is_empty() {
                return Err(NotationError::ClauseWithoutVersion {
                    constraint: s.into(),
                    clause: c.into(),
                });
            }
            let v = Partial::parse(rest).map_err(|e| NotationError::ConstraintVersion {
                constraint: s.into(),
                cause: Box::new(e),
            })?;
            clauses.push((op, v));
        }
        Ok(Constraint { clauses })
    }

    /// Whether `v` satisfies every clause.
    pub(crate) fn allows(&self, v: &Version) -> bool {
        if v.is_prerelease()
            && !self
                .clauses
                .iter()
                .any(|(op, p)| *op == Op::Eq && p.patch.is_some() && p.matches_exactly(v))
        {
            return false;
        }
        self.clauses.iter().all(|(op, p)| {
            let z = p.zero_filled();
            match op {
                Op::Eq => p.matches_exactly(v),
                Op::Ne => !p.matches_exactly(v),
                Op::Gt => v > &z,
                Op::Ge => v >= &z,
                Op::Lt => v < &z,
                Op::Le => v <= &z,
                Op::Pessimistic => {
                    let upper = match (p.minor, p.patch) {
                        (Some(m), Some(_)) => (p.major, m + 1),
                        _ => (p.major + 1, 0),
                    };
                    v >= &z && (v.major, v.minor) < upper
                }
            }
        })
    }

    /// Whether there are no clauses.
    pub(crate) fn is_empty(&self) -> bool {
        self.clauses.is_empty()
    }
}

/// Canonical form, as written to the lock file: clauses joined by `", "`, `=` written as a bare
/// version, the precision of each version kept (`~> 2.0`).
impl fmt::Display for Constraint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (op, v)) in self.clauses.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            match op {
                Op::Eq => write!(f, "{v}")?,
                _ => write!(f, "{} {v}", op.as_str())?,
            }
        }
        Ok(())
    }
}

/// A target platform `OS_ARCH` in Go's naming (`linux_amd64`, `darwin_arm64`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Platform {
    /// Operating system, e.g. `linux`, `darwin`, `windows`.
    pub os: String,
    /// CPU architecture, e.g. `amd64`, `arm64`, `386`, `arm`.
    pub arch: String,
}

impl Platform {
    /// The platform this program runs on.
    pub fn current() -> Platform {
        let os = match std::env::consts::OS {
            "macos" => "darwin",
            other => other,
        };
        let arch = match std::env::consts::ARCH {
            "x86_64" => "amd64",
            "aarch64" => "arm64",
            "x86" => "386",
            "powerpc64" => "ppc64",
            "s390x" => "s390x",
            other => other,
        };
        Platform {
            os: os.into(),
            arch: arch.into(),
        }
    }

    /// Parses `OS_ARCH`.
    pub fn parse(s: &str) -> Result<Platform, NotationError> {
        let ok = |p: &str| {
            !p.is_empty()
                && p.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        };
        match s.split_once('_') {
            Some((os, arch)) if ok(os) && ok(arch) => Ok(Platform {
                os: os.into(),
                arch: arch.into(),
            }),
            _ => Err(NotationError::BadPlatform { input: s.into() }),
        }
    }
}

impl Default for Platform {
    fn default() -> Self {
        Platform::current()
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}_{}", self.os, self.arch)
    }
}

impl FromStr for Platform {
    type Err = NotationError;
    fn from_str(s: &str) -> Result<Self, NotationError> {
        Platform::parse(s)
    }
}

/// The newest version in `available` that `constraint` allows.
pub(crate) fn newest_allowed<'a>(
    available: impl IntoIterator<Item = &'a Version>,
    constraint: &Constraint,
) -> Option<&'a Version> {
    available.into_iter().filter(|v| constraint.allows(v)).max()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap()
    }

    #[test]
    fn addresses() {
        let a = ProviderAddr::parse("hashicorp/null").unwrap();
        assert_eq!(a.to_string(), "registry.opentofu.org/hashicorp/null");
        let a = ProviderAddr::parse("Example.COM:8443/Acme/Thing").unwrap();
        assert_eq!(a.to_string(), "example.com:8443/acme/thing");
        assert!(ProviderAddr::parse("127.0.0.1:1234/nivis/null")
            .unwrap()
            .host_is_loopback());
        assert!(ProviderAddr::parse("a/b/c/d").is_err());
        assert!(ProviderAddr::parse("hashicorp/terraform-provider-null").is_err());
        assert!(ProviderAddr::parse("host:0/a/b").is_err());
        assert!(is_registry_address("hashicorp/null"));
        assert!(is_registry_address("registry.terraform.io/hashicorp/null"));
        assert!(!is_registry_address(
            "/nix/store/abc-null/bin/terraform-provider-null"
        ));
        assert!(!is_registry_address("./bin/terraform-provider-null"));
        assert!(!is_registry_address("bin/terraform-provider-null"));
        assert!(!is_registry_address("provider-alpha"));
        assert!(!is_registry_address("target/debug/provider-alpha"));
    }

    #[test]
    fn version_order() {
        let mut vs: Vec<Version> = [
            "1.0.0",
            "1.0.0-alpha",
            "1.0.0-alpha.1",
            "1.0.0-alpha.beta",
            "1.0.0-beta",
            "1.0.0-beta.2",
            "1.0.0-beta.11",
            "1.0.0-rc.1",
            "0.9.9",
            "1.0.1",
            "1.10.0",
            "1.2.0",
        ]
        .iter()
        .map(|s| v(s))
        .collect();
        vs.sort();
        let got: Vec<String> = vs.iter().map(|v| v.to_string()).collect();
        assert_eq!(
            got,
            [
                "0.9.9",
                "1.0.0-alpha",
                "1.0.0-alpha.1",
                "1.0.0-alpha.beta",
                "1.0.0-beta",
                "1.0.0-beta.2",
                "1.0.0-beta.11",
                "1.0.0-rc.1",
                "1.0.0",
                "1.0.1",
                "1.2.0",
                "1.10.0"
            ]
        );
        assert_eq!(v("v2.1.2"), v("2.1.2+build.5"));
        assert!(Version::parse("1.2").is_err());
        assert!(Version::parse("01.2.3").is_err());
    }

    #[test]
    fn constraints() {
        let c = |s: &str| Constraint::parse(s).unwrap();
        assert!(c("").allows(&v("3.0.0")));
        assert!(!c("").allows(&v("3.0.0-rc1")));
        assert!(c(">= 1.2, < 2").allows(&v("1.9.9")));
        assert!(!c(">= 1.2, < 2").allows(&v("2.0.0")));
        assert!(c("~> 1.2").allows(&v("1.9.0")) && !c("~> 1.2").allows(&v("2.0.0")));
        assert!(c("~> 1.2.3").allows(&v("1.2.9")) && !c("~> 1.2.3").allows(&v("1.3.0")));
        assert!(!c("~> 1.2.3").allows(&v("1.2.2")));
        assert!(c("~> 1").allows(&v("1.5.0")) && !c("~> 1").allows(&v("2.0.0")));
        assert!(c("1.2").allows(&v("1.2.7")) && !c("= 1.2").allows(&v("1.3.0")));
        assert!(!c("!= 1.2.3").allows(&v("1.2.3")));
        assert!(c("2.0.0-beta1").allows(&v("2.0.0-beta1")));
        assert!(!c(">= 1.0.0").allows(&v("2.0.0-beta1")));
        assert_eq!(
            c(">=4.0.0,~>2.0 , 1.2.3").to_string(),
            ">= 4.0.0, ~> 2.0, 1.2.3"
        );
        assert!(Constraint::parse(">=").is_err());
        assert!(Constraint::parse("~> x").is_err());
        let vs = [v("1.0.0"), v("1.4.0"), v("2.0.0"), v("1.5.0-rc1")];
        assert_eq!(newest_allowed(&vs, &c("~> 1.0")), Some(&vs[1]));
    }

    #[test]
    fn platforms() {
        assert_eq!(
            Platform::parse("linux_amd64").unwrap().to_string(),
            "linux_amd64"
        );
        assert!(Platform::parse("linux").is_err());
        assert!(Platform::parse("Linux_amd64").is_err());
        let cur = Platform::current();
        assert!(!cur.os.is_empty() && !cur.arch.is_empty());
    }
}

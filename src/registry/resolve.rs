//! Resolution: which source a package comes from, which version, and whether it may be used.
//!
//! Owns the search order (filesystem mirrors, cache, network mirrors, registry; the last two
//! never when offline), version selection (the lock file's version, else the newest the
//! constraint allows at the first source offering one), the lock-file check every package
//! passes, and the three entry points behind `install`, `lock` and `mirror`. The protocols,
//! hashing, unpacking and caching are delegated to their modules.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex};

use super::address::{newest_allowed, Constraint, Platform, ProviderAddr, Version};
use super::cache::Cache;
use super::error::{Check, InstallError, Subject};
use super::fsmirror::FsMirror;
use super::hash::{self, Hash};
use super::http::Http;
use super::lockfile::{self, LockFile, LockedProvider};
use super::mirror_write;
use super::netmirror::NetMirror;
use super::package::{self, Location, Measured, Package, TempDir, Trust};
use super::registry::Registry;
use super::{InstallOptions, Installed, Origin, Source};

/// The sources for one run, built once.
struct Ctx<'a> {
    opts: &'a InstallOptions,
    cache: Cache,
    fs: Vec<Arc<dyn Source>>,
    net: Vec<Arc<dyn Source>>,
    http: Option<Arc<Http>>,
    registries: Mutex<HashMap<String, Arc<dyn Source>>>,
}

impl<'a> Ctx<'a> {
    fn new(opts: &'a InstallOptions) -> Ctx<'a> {
        let http = (!opts.offline).then(|| Arc::new(Http::new(opts.insecure_loopback_http)));
        let fs = opts
            .fs_mirrors
            .iter()
            .map(|p| Arc::new(FsMirror::new(p)) as Arc<dyn Source>)
            .collect();
        let net = match &http {
            Some(h) => opts
                .net_mirrors
                .iter()
                .map(|u| Arc::new(NetMirror::new(u, h.clone())) as Arc<dyn Source>)
                .collect(),
            None => Vec::new(),
        };
        Ctx {
            opts,
            cache: Cache::new(&opts.cache_dir),
            fs,
            net,
            http,
            registries: Mutex::new(HashMap::new()),
        }
    }

    /// Network mirrors then the origin registry; empty when offline.
    fn remote(&self, addr: &ProviderAddr) -> Vec<Arc<dyn Source>> {
        let Some(http) = &self.http else {
            return Vec::new();
        };
        let mut out = self.net.clone();
        let mut regs = self.registries.lock().unwrap_or_else(|e| e.into_inner());
        let reg = regs.entry(addr.host.clone()).or_insert_with(|| {
            Arc::new(Registry::new(
                &addr.host,
                http.clone(),
                self.opts.insecure_loopback_http,
            ))
        });
        out.push(reg.clone());
        out
    }

    /// Every source in order (the cache is not a `Source`; `install` consults it separately).
    fn all(&self, addr: &ProviderAddr) -> Vec<Arc<dyn Source>> {
        let mut out = self.fs.clone();
        out.extend(self.remote(addr));
        out
    }

    fn scratch(&self, source: &dyn Source) -> Result<Option<TempDir>, InstallError> {
        match source.origin() {
            Origin::FsMirror(_) => Ok(None),
            _ => self.cache.scratch("fetch").map(Some),
        }
    }
}

fn parse_addr(source: &str) -> Result<ProviderAddr, InstallError> {
    ProviderAddr::parse(source).map_err(|reason| InstallError::InvalidAddress {
        source: source.to_string(),
        reason: reason.to_string(),
    })
}

fn parse_constraint(c: Option<&str>) -> Result<Constraint, InstallError> {
    Constraint::parse(c.unwrap_or("")).map_err(|reason| InstallError::InvalidArgument {
        value: c.unwrap_or("").to_string(),
        reason: reason.to_string(),
    })
}

fn constraint_string(c: &Constraint) -> Option<String> {
    (!c.is_empty()).then(|| c.to_string())
}

fn wanted(locked: Option<&Version>, c: &Constraint) -> String {
    match locked {
        Some(v) => format!("locked version {v}"),
        None if c.is_empty() => "any version".into(),
        None => format!("version {c}"),
    }
}

/// The lock file's selection for `addr` (none when `update_lock` asks to choose afresh); an
/// error when the locked version no longer satisfies `constraint`.
fn locked_entry<'l>(
    lock: &'l LockFile,
    addr: &ProviderAddr,
    constraint: &Constraint,
    opts: &InstallOptions,
) -> Result<Option<&'l LockedProvider>, InstallError> {
    let prior = if opts.update_lock {
        None
    } else {
        lock.get(addr)
    };
    if let Some(p) = prior {
        if !constraint.allows(&p.version) {
            return Err(InstallError::LockedVersionRejected {
                address: addr.to_string(),
                locked: p.version.to_string(),
                constraint: constraint.to_string(),
                lock_file: opts.lock_file.clone(),
            });
        }
    }
    Ok(prior)
}

/// The lock entry usable to verify `version`, if any.
fn entry_for<'l>(
    prior: Option<&'l LockedProvider>,
    version: &Version,
) -> Option<&'l LockedProvider> {
    prior.filter(|e| &e.version == version && e.has_preferred_hashes())
}

fn strings(hashes: impl IntoIterator<Item = impl AsRef<str>>) -> Vec<String> {
    hashes.into_iter().map(|h| h.as_ref().to_string()).collect()
}

/// Checks a fetched package against the lock entry (or, without one, requires that its source
/// vouched for it) and returns its hashes. Cheapest first: a zip's `zh:` (one pass over the
/// archive) settles a lock entry that records no `h1:`; then the zip's shape (its directory
/// alone); only then is anything decompressed.
fn accept(
    subject: &Subject,
    pkg: &mut Package,
    prior: Option<&LockedProvider>,
    lock_file: &Path,
) -> Result<Measured, InstallError> {
    let entry = entry_for(prior, &subject.version);
    let mismatch = |got: &[Hash]| InstallError::LockMismatch {
        package: subject.package(&pkg.origin),
        locked: strings(
            entry
                .into_iter()
                .flat_map(|e| e.preferred_hashes().map(Hash::as_str)),
        ),
        got: strings(got.iter().map(Hash::as_str)),
        lock_file: lock_file.to_path_buf(),
    };
    let measured = match (pkg.measured.take(), &pkg.location) {
        (Some(m), _) => m,
        (None, Location::Zip(zip)) => {
            let zh = hash::zh_of_file(zip)
                .map_err(|e| subject.refuse(&pkg.origin, Check::Contents, e.to_string()))?;
            let h1_could_match = entry.is_some_and(|e| e.hashes.iter().any(|h| h.scheme() == "h1"));
            if entry.is_some_and(|e| !e.accepts(std::slice::from_ref(&zh))) && !h1_could_match {
                return Err(mismatch(&[zh]));
            }
            package::measure_zip(zip, Some(zh))
                .map_err(|e| subject.refuse(&pkg.origin, Check::Contents, e))?
        }
        (None, location) => package::measure(location)
            .map_err(|e| subject.refuse(&pkg.origin, Check::Contents, e))?,
    };
    if let Some(entry) = entry {
        if !entry.accepts(&measured.all()) {
            return Err(mismatch(&measured.all()));
        }
    } else if pkg.trust == Trust::Unverified {
        return Err(subject.refuse(
            &pkg.origin,
            Check::Unverified,
            "the source lists no hashes for it and the lock file has no entry to check it against",
        ));
    }
    Ok(measured)
}

/// Versions a source offers, with a line for the "searched" list.
fn offered(
    source: &dyn Source,
    addr: &ProviderAddr,
    platform: &Platform,
    searched: &mut Vec<String>,
) -> Result<Vec<Version>, InstallError> {
    let mut versions = source.versions(addr, platform)?;
    versions.sort();
    let origin = source.origin();
    if versions.is_empty() {
        searched.push(format!("{origin}: no package of {addr} for {platform}"));
    } else {
        let shown: Vec<String> = versions
            .iter()
            .rev()
            .take(8)
            .map(|v| v.to_string())
            .collect();
        let more = if versions.len() > 8 { ", …" } else { "" };
        searched.push(format!("{origin}: offers {}{more}", shown.join(", ")));
    }
    Ok(versions)
}

/// Picks the version to use from the first source offering an allowed one (or the locked one).
fn select(
    ctx: &Ctx,
    addr: &ProviderAddr,
    constraint: &Constraint,
    locked: Option<&Version>,
    platforms: &[Platform],
    searched: &mut Vec<String>,
) -> Result<Option<Version>, InstallError> {
    if let Some(v) = locked {
        return Ok(Some(v.clone()));
    }
    for source in ctx.all(addr) {
        for platform in platforms {
            let versions = offered(source.as_ref(), addr, platform, searched)?;
            if let Some(v) = newest_allowed(&versions, constraint) {
                return Ok(Some(v.clone()));
            }
        }
    }
    Ok(None)
}

/// Fetches `subject` from the first source of `sources` that has it.
fn fetch_first(
    ctx: &Ctx,
    sources: &[Arc<dyn Source>],
    subject: &Subject,
    searched: &mut Vec<String>,
) -> Result<Option<(Package, Option<TempDir>)>, InstallError> {
    for source in sources {
        let versions = offered(source.as_ref(), &subject.addr, &subject.platform, searched)?;
        if !versions.contains(&subject.version) {
            continue;
        }
        if let Some(found) = fetch_from(ctx, source.as_ref(), subject, searched)? {
            return Ok(Some(found));
        }
    }
    Ok(None)
}

/// Fetches `subject` from `source`; `Ok(None)` (noted in `searched`) if the source has the
/// version but not for this platform.
fn fetch_from(
    ctx: &Ctx,
    source: &dyn Source,
    subject: &Subject,
    searched: &mut Vec<String>,
) -> Result<Option<(Package, Option<TempDir>)>, InstallError> {
    let scratch = ctx.scratch(source)?;
    let dir = scratch.as_ref().map_or(Path::new(""), |t| t.path());
    match source.fetch(subject, dir) {
        Ok(pkg) => Ok(Some((pkg, scratch))),
        Err(InstallError::PlatformUnavailable { .. }) => {
            searched.push(format!(
                "{}: {} {} is not available for {}",
                source.origin(),
                subject.addr,
                subject.version,
                subject.platform
            ));
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

fn not_found(
    ctx: &Ctx,
    addr: &ProviderAddr,
    wanted: String,
    platform: &Platform,
    mut searched: Vec<String>,
) -> InstallError {
    if ctx.opts.offline {
        searched.push(format!(
            "{}: no entry matching the lock file",
            Origin::Cache
        ));
        InstallError::NotFoundOffline {
            address: addr.to_string(),
            wanted,
            platform: platform.to_string(),
            searched,
        }
    } else {
        InstallError::NoMatchingVersion {
            address: addr.to_string(),
            wanted,
            platform: platform.to_string(),
            searched,
        }
    }
}

// Long because it is the install sequence (lock, cache, fetch, verify, record) read top to bottom;
// each step's errors are handled where they happen.
pub(crate) fn install(
    source: &str,
    constraint: Option<&str>,
    opts: &InstallOptions,
) -> Result<Installed, InstallError> {
    let addr = parse_addr(source)?;
    let constraint = parse_constraint(constraint)?;
    let platform = opts.platform.clone();
    let lock = LockFile::read(&opts.lock_file)?;
    let prior = locked_entry(&lock, &addr, &constraint, opts)?;
    let locked = prior.map(|p| &p.version);
    let ctx = Ctx::new(opts);
    let mut searched = Vec::new();
    let mut warnings = lock.warnings.clone();

    // 1. Filesystem mirrors; 2. the cache; 3. network mirrors and the registry.
    let pick_from = |sources: &[Arc<dyn Source>],
                     searched: &mut Vec<String>|
     -> Result<Option<(Package, Option<TempDir>, Subject)>, InstallError> {
        for source in sources {
            let versions = offered(source.as_ref(), &addr, &platform, searched)?;
            let version = match locked {
                Some(v) if versions.contains(v) => v.clone(),
                Some(_) => continue,
                None => match newest_allowed(&versions, &constraint) {
                    Some(v) => v.clone(),
                    None => continue,
                },
            };
            let subject = Subject {
                addr: addr.clone(),
                version,
                platform: platform.clone(),
            };
            if let Some((pkg, scratch)) = fetch_from(&ctx, source.as_ref(), &subject, searched)? {
                return Ok(Some((pkg, scratch, subject)));
            }
        }
        Ok(None)
    };

    let mut found = pick_from(&ctx.fs, &mut searched)?;
    if found.is_none() {
        if let Some(entry) = prior.filter(|p| p.has_preferred_hashes()) {
            let accept: Vec<Hash> = entry.preferred_hashes().cloned().collect();
            if let Some(c) = ctx
                .cache
                .lookup(&addr, &entry.version, &platform, &accept)?
            {
                let hashes = record(
                    opts,
                    &addr,
                    &entry.version,
                    &constraint,
                    vec![c.h1.clone()],
                    Vec::new(),
                )?;
                return Ok(Installed {
                    address: addr,
                    version: entry.version.clone(),
                    platform,
                    executable: c.executable,
                    package_dir: c.dir,
                    from: Origin::Cache,
                    hashes,
                    warnings,
                });
            }
        }
        found = pick_from(&ctx.remote(&addr), &mut searched)?;
    }
    let Some((mut pkg, _scratch, subject)) = found else {
        return Err(not_found(
            &ctx,
            &addr,
            wanted(locked, &constraint),
            &platform,
            searched,
        ));
    };

    let measured = accept(&subject, &mut pkg, prior, &opts.lock_file)?;
    let (package_dir, executable) = match &pkg.location {
        Location::Zip(zip) => {
            let c = ctx
                .cache
                .install_zip(&subject, &pkg.origin, zip, &measured.h1)?;
            (c.dir, c.executable)
        }
        Location::Dir(dir) => {
            let exe = package::find_executable(dir, &addr.type_).ok_or_else(|| {
                subject.refuse(
                    &pkg.origin,
                    Check::Contents,
                    format!(
                        "no file named terraform-provider-{}[_…] in {}",
                        addr.type_,
                        dir.display()
                    ),
                )
            })?;
            (dir.clone(), exe)
        }
    };
    let hashes = record(
        opts,
        &addr,
        &subject.version,
        &constraint,
        measured.recordable(),
        pkg.vouched.clone(),
    )?;
    warnings.append(&mut pkg.warnings);
    Ok(Installed {
        address: addr,
        version: subject.version,
        platform,
        executable,
        package_dir,
        from: pkg.origin.clone(),
        hashes,
        warnings,
    })
}

/// Records an install in the lock file and returns the entry's hashes.
fn record(
    opts: &InstallOptions,
    addr: &ProviderAddr,
    version: &Version,
    constraint: &Constraint,
    measured: Vec<Hash>,
    vouched: Vec<Hash>,
) -> Result<Vec<String>, InstallError> {
    lockfile::update(&opts.lock_file, |lf| {
        if opts.update_lock {
            lf.providers.remove(addr);
        }
        lf.record(
            addr,
            version,
            constraint_string(constraint),
            measured.into_iter().chain(vouched),
        );
        Ok(strings(
            lf.get(addr)
                .map(|e| e.hashes.iter().map(Hash::as_str).collect::<Vec<_>>())
                .unwrap_or_default(),
        ))
    })
}

fn parse_all(
    sources: &[(String, Option<String>)],
) -> Result<Vec<(ProviderAddr, Constraint)>, InstallError> {
    sources
        .iter()
        .map(|(s, c)| Ok((parse_addr(s)?, parse_constraint(c.as_deref())?)))
        .collect()
}

/// For `lock` and `mirror`: the version of each provider and its verified packages per
/// platform, handed to `each` as they are fetched.
fn for_each_package(
    ctx: &Ctx,
    sources: &[(String, Option<String>)],
    platforms: &[Platform],
    mut each: impl FnMut(
        &ProviderAddr,
        &Constraint,
        &Subject,
        &Package,
        &Measured,
    ) -> Result<(), InstallError>,
    mut done: impl FnMut(&ProviderAddr) -> Result<(), InstallError>,
) -> Result<(), InstallError> {
    let opts = ctx.opts;
    let platforms: Vec<Platform> = if platforms.is_empty() {
        vec![opts.platform.clone()]
    } else {
        platforms.to_vec()
    };
    let lock = LockFile::read(&opts.lock_file)?;
    for (addr, constraint) in parse_all(sources)? {
        let prior = locked_entry(&lock, &addr, &constraint, opts)?;
        let locked = prior.map(|p| &p.version);
        let mut searched = Vec::new();
        let Some(version) = select(ctx, &addr, &constraint, locked, &platforms, &mut searched)?
        else {
            return Err(not_found(
                ctx,
                &addr,
                wanted(locked, &constraint),
                &platforms[0],
                searched,
            ));
        };
        for platform in &platforms {
            let subject = Subject {
                addr: addr.clone(),
                version: version.clone(),
                platform: platform.clone(),
            };
            let mut searched = Vec::new();
            let Some((mut pkg, _scratch)) =
                fetch_first(ctx, &ctx.all(&addr), &subject, &mut searched)?
            else {
                return Err(not_found(
                    ctx,
                    &addr,
                    format!("version {version}"),
                    platform,
                    searched,
                ));
            };
            let measured = accept(&subject, &mut pkg, prior, &opts.lock_file)?;
            each(&addr, &constraint, &subject, &pkg, &measured)?;
        }
        done(&addr)?;
    }
    Ok(())
}

pub(crate) fn lock(
    sources: &[(String, Option<String>)],
    platforms: &[Platform],
    opts: &InstallOptions,
) -> Result<(), InstallError> {
    let ctx = Ctx::new(opts);
    let mut entries: Vec<(ProviderAddr, Version, Constraint, BTreeSet<Hash>)> = Vec::new();
    for_each_package(
        &ctx,
        sources,
        platforms,
        |addr, constraint, subject, pkg, measured| {
            if entries.last().is_none_or(|e| &e.0 != addr) {
                entries.push((
                    addr.clone(),
                    subject.version.clone(),
                    constraint.clone(),
                    BTreeSet::new(),
                ));
            }
            let e = entries.last_mut().expect("pushed above");
            e.3.extend(measured.recordable());
            e.3.extend(pkg.vouched.iter().cloned());
            Ok(())
        },
        |_| Ok(()),
    )?;
    lockfile::update(&opts.lock_file, |lf| {
        for (addr, version, constraint, hashes) in entries {
            if opts.update_lock {
                lf.providers.remove(&addr);
            }
            lf.record(&addr, &version, constraint_string(&constraint), hashes);
        }
        Ok(())
    })
}

pub(crate) fn mirror(
    sources: &[(String, Option<String>)],
    platforms: &[Platform],
    dir: &Path,
    opts: &InstallOptions,
) -> Result<(), InstallError> {
    std::fs::create_dir_all(dir).map_err(|e| InstallError::io(dir, "create", e))?;
    let ctx = Ctx::new(opts);
    for_each_package(
        &ctx,
        sources,
        platforms,
        |addr, _, subject, pkg, _| {
            mirror_write::place(
                dir,
                addr,
                &subject.version,
                &subject.platform,
                &pkg.location,
            )
            .map(|_| ())
        },
        |addr| mirror_write::write_indexes(dir, addr),
    )
}

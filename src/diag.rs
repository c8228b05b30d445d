//! Diagnostics: what went wrong or deserves attention, and where.
//!
//! Owns the [`Diagnostic`] record (severity, summary, detail, attribute path, resource, phase) and
//! the [`Diagnostics`] list that accumulates them. Providers report problems this way, and so do
//! Nivis's own checks. Rendering for a terminal or JSON belongs to `render`, not here.

use std::fmt;

use crate::value::{render_path, PathStep};

/// How serious a diagnostic is. Protocol `INVALID` severities are treated as errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The operation failed.
    Error,
    /// The operation went ahead, but something deserves attention.
    Warning,
}

/// One problem report.
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// One line saying what is wrong.
    pub summary: String,
    /// More explanation, possibly multi-line; may be empty.
    pub detail: String,
    /// The attribute the problem is about, within the resource's config, if known.
    pub path: Option<Vec<PathStep>>,
    /// The resource (IR id) the problem is about, if known.
    pub(crate) resource: Option<String>,
    /// Set when the call failed because the provider's process was gone (crashed or exited):
    /// every call one death fails carries it, so that death is reported once.
    pub(crate) provider_gone: Option<ProviderGone>,
}

/// A provider process gone when a call to it failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProviderGone {
    /// The provider's name.
    pub(crate) provider: String,
    /// Whether the call was an operation on a real object (`ApplyResourceChange`): it may have
    /// been carried out. Any other call (validation, planning, reading) changed nothing.
    pub(crate) operation: bool,
}

impl Diagnostic {
    /// An error with a summary and no detail.
    pub fn error(summary: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Error,
            summary: summary.into(),
            detail: String::new(),
            path: None,
            resource: None,
            provider_gone: None,
        }
    }

    /// A warning with a summary and no detail.
    pub(crate) fn warning(summary: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Warning,
            ..Diagnostic::error(summary)
        }
    }

    /// Adds explanatory detail.
    pub(crate) fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = detail.into();
        self
    }

    /// Attaches the diagnostic to a resource, unless it already names one.
    pub(crate) fn for_resource(mut self, id: &str) -> Self {
        if self.resource.is_none() {
            self.resource = Some(id.to_string());
        }
        self
    }

    /// Attaches an attribute path.
    pub fn at(mut self, path: Vec<PathStep>) -> Self {
        self.path = Some(path);
        self
    }

    /// True for errors.
    pub(crate) fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let label = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(f, "{label}")?;
        if let Some(resource) = &self.resource {
            write!(f, " in {resource}")?;
        }
        if let Some(path) = self.path.as_deref().filter(|p| !p.is_empty()) {
            write!(f, " at {}", render_path(path))?;
        }
        write!(f, ": {}", self.summary)?;
        if !self.detail.is_empty() {
            for line in self.detail.lines() {
                write!(f, "\n    {line}")?;
            }
        }
        Ok(())
    }
}

/// An ordered list of diagnostics, errors and warnings mixed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl Diagnostics {
    /// An empty list.
    pub fn new() -> Self {
        Diagnostics(Vec::new())
    }

    /// Appends one diagnostic.
    pub fn push(&mut self, diagnostic: Diagnostic) {
        self.0.push(diagnostic);
    }

    /// Appends all of `other`.
    pub(crate) fn extend(&mut self, other: Diagnostics) {
        self.0.extend(other.0);
    }

    /// True if any diagnostic is an error.
    pub fn has_errors(&self) -> bool {
        self.0.iter().any(Diagnostic::is_error)
    }

    /// The errors only.
    pub fn errors(&self) -> impl Iterator<Item = &Diagnostic> {
        self.0.iter().filter(|d| d.is_error())
    }

    /// The warnings only.
    pub(crate) fn warnings(&self) -> impl Iterator<Item = &Diagnostic> {
        self.0.iter().filter(|d| !d.is_error())
    }

    /// Attaches every diagnostic that names no resource to `id`.
    pub(crate) fn for_resource(self, id: &str) -> Self {
        Diagnostics(self.0.into_iter().map(|d| d.for_resource(id)).collect())
    }
}

impl From<Diagnostic> for Diagnostics {
    fn from(d: Diagnostic) -> Self {
        Diagnostics(vec![d])
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

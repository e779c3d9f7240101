//! Archive errors: a [`SkipReason`], how much it spoils, and a detail.

use std::fmt;
use std::io;

use crate::skip::{ByteScope, SkipReason};

/// How much of the archive an error spoils.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorScope {
    /// Only the current member: the cursor has moved past it and
    /// `next_member` may be called again (an encrypted zip member, an
    /// unsupported compression method, a member over `max_entry_bytes`, a zip
    /// member whose CRC does not match, a nested archive too deep).
    Member,
    /// The whole rest of the archive: every later call returns this error
    /// again (a truncated tar, a corrupt gzip stream, the per-archive or
    /// per-root budget, the entry-count limit).
    Archive,
}

/// An error from reading an archive. [`ArchiveError::skip_reason`] is what the
/// caller counts; [`ArchiveError::scope`] tells whether the cursor can go on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArchiveError {
    reason: SkipReason,
    scope: ErrorScope,
    member: Option<Vec<u8>>,
    detail: String,
}

impl ArchiveError {
    pub(crate) fn new(reason: SkipReason, scope: ErrorScope, detail: impl Into<String>) -> Self {
        ArchiveError {
            reason,
            scope,
            member: None,
            detail: detail.into(),
        }
    }

    pub(crate) fn corrupt(scope: ErrorScope, detail: impl Into<String>) -> Self {
        Self::new(SkipReason::ArchiveCorrupt, scope, detail)
    }

    pub(crate) fn with_member(mut self, name: &[u8]) -> Self {
        if self.member.is_none() {
            self.member = Some(name.to_vec());
        }
        self
    }

    pub(crate) fn with_scope(mut self, scope: ErrorScope) -> Self {
        self.scope = scope;
        self
    }

    /// Maps an I/O error met while reading archive bytes. An error that carries
    /// an `ArchiveError` (raised below, e.g. by a parent cursor or the gzip
    /// ratio guard) is unwrapped; an OS error is "unreadable"; anything else
    /// comes from a decoder and means corrupt or truncated data.
    pub(crate) fn from_io(err: &io::Error, scope: ErrorScope) -> Self {
        if let Some(inner) = err.get_ref().and_then(|e| e.downcast_ref::<ArchiveError>()) {
            return inner.clone().with_scope(scope);
        }
        if err.raw_os_error().is_some() {
            return Self::new(SkipReason::Unreadable(err.kind()), scope, err.to_string());
        }
        Self::corrupt(scope, err.to_string())
    }

    pub(crate) fn into_io(self) -> io::Error {
        io::Error::other(self)
    }

    /// What the caller counts the skipped member or archive as.
    pub fn skip_reason(&self) -> SkipReason {
        self.reason
    }

    /// Whether only the current member is lost or the rest of the archive.
    pub fn scope(&self) -> ErrorScope {
        self.scope
    }

    /// The raw name of the member the error is about, when there is one.
    pub fn member(&self) -> Option<&[u8]> {
        self.member.as_deref()
    }

    /// A human detail ("CRC mismatch", "tar header checksum mismatch", ...).
    pub fn detail(&self) -> &str {
        &self.detail
    }

    /// An encrypted member.
    pub fn is_encrypted(&self) -> bool {
        self.reason == SkipReason::ArchiveEncrypted
    }

    /// Corrupt or truncated data, or an unsupported feature.
    pub fn is_corrupt(&self) -> bool {
        matches!(
            self.reason,
            SkipReason::ArchiveCorrupt | SkipReason::ArchiveUnsupported(_)
        )
    }

    /// A limit was hit: depth, entry count, a byte budget or the inflation ratio.
    pub fn is_over_budget(&self) -> bool {
        matches!(
            self.reason,
            SkipReason::ArchiveDepth
                | SkipReason::ArchiveEntries
                | SkipReason::ArchiveBytes(_)
                | SkipReason::ArchiveInflation
        )
    }

    /// Which byte budget ran out, if this is a byte-budget error.
    pub fn byte_scope(&self) -> Option<ByteScope> {
        match self.reason {
            SkipReason::ArchiveBytes(s) => Some(s),
            _ => None,
        }
    }
}

impl fmt::Display for ArchiveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.reason)?;
        if let Some(m) = &self.member {
            write!(f, " in member {:?}", String::from_utf8_lossy(m))?;
        }
        if !self.detail.is_empty() {
            write!(f, ": {}", self.detail)?;
        }
        Ok(())
    }
}

impl std::error::Error for ArchiveError {}

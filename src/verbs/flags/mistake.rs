//! The one way the flag checks make a usage mistake: a leaf, so that every flag
//! file can use it without leaning on the plan that uses them.

use crate::job::UsageError;

/// A usage mistake: one line naming the flag, what was typed and the fix (exit 2).
pub fn usage(msg: impl Into<String>) -> UsageError {
    UsageError(msg.into())
}

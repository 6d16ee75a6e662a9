//! The boxed futures the facade's handles await their stores' calls through.
//!
//! May import: nothing of the crate (a leaf).

use std::pin::Pin;

/// A boxed future. The facade's handles await their store's futures through one: the
/// application's futures then hold a `dyn Future + Send` instead of nesting the store's types,
/// whose depth (with the facade's layers on top) would pass the compiler's recursion limit
/// where the application checks `Send` (`tokio::spawn`). One allocation per call, beside a
/// network round trip.
pub(crate) type Boxed<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Boxes `future` (see [`Boxed`]).
pub(crate) fn boxed<'a, T>(future: impl Future<Output = T> + Send + 'a) -> Boxed<'a, T> {
    Box::pin(future)
}

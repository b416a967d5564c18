//! Catching a panic inside a future (a tool's `invoke`, an interceptor), so a panic becomes a
//! typed outcome and never unwinds into the caller. The future is pinned by the caller (on the
//! stack, with `pin!`), so catching costs no allocation.

use std::any::Any;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::task::{Context, Poll};

/// A future that turns a panic while polling `F` into `Err(message)`.
pub(crate) struct CatchUnwind<'a, F>(Pin<&'a mut F>);

impl<'a, F: Future> CatchUnwind<'a, F> {
    pub(crate) fn new(future: Pin<&'a mut F>) -> Self {
        Self(future)
    }
}

impl<F: Future> Future for CatchUnwind<'_, F> {
    type Output = Result<F::Output, String>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = self.0.as_mut();
        match catch_unwind(AssertUnwindSafe(move || inner.poll(cx))) {
            Ok(Poll::Ready(v)) => Poll::Ready(Ok(v)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(payload) => Poll::Ready(Err(panic_message(payload.as_ref()))),
        }
    }
}

/// Awaits `future`, catching a panic.
macro_rules! caught {
    ($future:expr) => {{
        let future = ::std::pin::pin!($future);
        $crate::unwind::CatchUnwind::new(future).await
    }};
}
pub(crate) use caught;

/// The text of a panic payload.
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic".to_owned()
    }
}

//! `FuturesIo`: a futures-io stream as hyper's `Read + Write`.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use futures_io::{AsyncRead, AsyncWrite};
use hyper::rt::ReadBufCursor;

/// The largest read [`FuturesIo`] makes at once, and so the most its
/// scratch buffer grows to. hyper's read buffer starts at 8 KiB; 16 KiB
/// covers it with room, and a larger request just takes another read.
pub const SCRATCH_BYTES: usize = 16 * 1024;

/// Adapts a `futures_io::AsyncRead + AsyncWrite` stream to hyper's
/// `hyper::rt::Read + Write`, as hyper-util's `TokioIo` does for tokio's
/// traits.
///
/// | hyper | futures-io |
/// | --- | --- |
/// | `Read::poll_read(cursor)` | `AsyncRead::poll_read` into a scratch buffer, then `cursor.put_slice` |
/// | `Write::poll_write` | `AsyncWrite::poll_write` |
/// | `Write::poll_write_vectored` | `AsyncWrite::poll_write_vectored` |
/// | `Write::is_write_vectored` | the flag set by [`with_vectored_writes`](FuturesIo::with_vectored_writes) (futures-io has no such query) |
/// | `Write::poll_flush` | `AsyncWrite::poll_flush` |
/// | `Write::poll_shutdown` | `AsyncWrite::poll_close` |
///
/// **The read copy.** hyper's cursor is uninitialised memory; handing it to
/// a `&mut [u8]` API needs `unsafe` (that is what `TokioIo` does), which this
/// crate forbids. So a read lands in a scratch buffer owned by the adaptor
/// (zeroed once as it grows, at most [`SCRATCH_BYTES`]) and is copied into
/// the cursor: one `memcpy` of the bytes actually read.
#[derive(Debug)]
pub struct FuturesIo<T> {
    inner: T,
    scratch: Vec<u8>,
    vectored: bool,
}

impl<T> FuturesIo<T> {
    /// Wraps `inner`. hyper is told writes are not vectored, so it flattens
    /// each message into one buffer before writing.
    pub fn new(inner: T) -> FuturesIo<T> {
        FuturesIo {
            inner,
            scratch: Vec::new(),
            vectored: false,
        }
    }

    /// Tells hyper whether `inner` writes several buffers in one call. Set
    /// it only when `inner` overrides `poll_write_vectored` (a TCP stream
    /// does; futures-io's default writes just the first buffer).
    pub fn with_vectored_writes(mut self, vectored: bool) -> FuturesIo<T> {
        self.vectored = vectored;
        self
    }

    /// The wrapped stream.
    pub fn get_ref(&self) -> &T {
        &self.inner
    }

    /// The wrapped stream, mutably.
    pub fn get_mut(&mut self) -> &mut T {
        &mut self.inner
    }

    /// Unwraps the stream.
    pub fn into_inner(self) -> T {
        self.inner
    }
}

impl<T: AsyncRead + Unpin> hyper::rt::Read for FuturesIo<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let want = buf.remaining().min(SCRATCH_BYTES);
        if this.scratch.len() < want {
            this.scratch.resize(want, 0);
        }
        let n = ready!(Pin::new(&mut this.inner).poll_read(cx, &mut this.scratch[..want]))?;
        buf.put_slice(&this.scratch[..n]);
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncWrite + Unpin> hyper::rt::Write for FuturesIo<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.vectored
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_close(cx)
    }
}

//! The zygote's wire: length-prefixed fields in `SOCK_SEQPACKET` messages, with descriptors
//! riding along as `SCM_RIGHTS`.
//!
//! A request can be larger than one datagram may be (the kernel refuses a message bigger than
//! the socket's send buffer with `EMSGSIZE`), so it goes out as a first message that carries the
//! total length and every descriptor, followed by as many plain chunks as it takes. The caller
//! holds its lock for the whole round trip, so chunks of two requests never interleave.
//!
//! # References
//! - [`unix(7)`](https://man7.org/linux/man-pages/man7/unix.7.html) (`SCM_RIGHTS`, `SOCK_SEQPACKET`)
//! - [`sendmsg(2)`](https://man7.org/linux/man-pages/man2/sendmsg.2.html),
//!   [`recvmsg(2)`](https://man7.org/linux/man-pages/man2/recvmsg.2.html),
//!   [`cmsg(3)`](https://man7.org/linux/man-pages/man3/cmsg.3.html)
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// The largest datagram either side sends: well under the default socket buffer, so a send never
/// fails with `EMSGSIZE` on an ordinary system.
pub(crate) const CHUNK: usize = 16 * 1024;

/// At most this many descriptors travel with one message (the kernel's `SCM_MAX_FD` is 253).
pub(crate) const MAX_FDS: usize = 250;

/// Appends fields to a message.
#[derive(Default)]
pub(crate) struct Writer(pub(crate) Vec<u8>);

impl Writer {
    pub(crate) fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    pub(crate) fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_ne_bytes());
    }
    pub(crate) fn i32(&mut self, v: i32) {
        self.0.extend_from_slice(&v.to_ne_bytes());
    }
    pub(crate) fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_ne_bytes());
    }
    pub(crate) fn bool(&mut self, v: bool) {
        self.u8(v as u8);
    }
    /// A length-prefixed byte string.
    pub(crate) fn bytes(&mut self, v: &[u8]) {
        self.u32(v.len() as u32);
        self.0.extend_from_slice(v);
    }
    /// `0` for `None`, `1` and the value for `Some`.
    pub(crate) fn opt<T>(&mut self, v: Option<T>, f: impl FnOnce(&mut Writer, T)) {
        match v {
            None => self.u8(0),
            Some(v) => {
                self.u8(1);
                f(self, v);
            }
        }
    }
}

/// Reads fields back, refusing (never panicking on) anything short or malformed.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
}

/// A message that does not parse.
pub(crate) fn malformed() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, "malformed zygote message")
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf }
    }
    fn take(&mut self, n: usize) -> io::Result<&'a [u8]> {
        if self.buf.len() < n {
            return Err(malformed());
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }
    fn array<const N: usize>(&mut self) -> io::Result<[u8; N]> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }
    pub(crate) fn u8(&mut self) -> io::Result<u8> {
        Ok(self.array::<1>()?[0])
    }
    pub(crate) fn u32(&mut self) -> io::Result<u32> {
        self.array().map(u32::from_ne_bytes)
    }
    pub(crate) fn i32(&mut self) -> io::Result<i32> {
        self.array().map(i32::from_ne_bytes)
    }
    pub(crate) fn u64(&mut self) -> io::Result<u64> {
        self.array().map(u64::from_ne_bytes)
    }
    pub(crate) fn bool(&mut self) -> io::Result<bool> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(malformed()),
        }
    }
    pub(crate) fn bytes(&mut self) -> io::Result<&'a [u8]> {
        let len = self.u32()? as usize;
        self.take(len)
    }
    pub(crate) fn opt<T>(
        &mut self,
        f: impl FnOnce(&mut Reader<'a>) -> io::Result<T>,
    ) -> io::Result<Option<T>> {
        match self.u8()? {
            0 => Ok(None),
            1 => f(self).map(Some),
            _ => Err(malformed()),
        }
    }
    /// A count that cannot be larger than what is left (every item takes at least one byte), so
    /// a corrupt count cannot make the reader reserve huge vectors.
    pub(crate) fn count(&mut self) -> io::Result<usize> {
        let n = self.u32()? as usize;
        if n > self.buf.len() {
            return Err(malformed());
        }
        Ok(n)
    }
    /// Fails unless everything was read.
    pub(crate) fn finish(&self) -> io::Result<()> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(malformed())
        }
    }
}

/// `sendmsg` of one datagram with `fds` attached, never raising `SIGPIPE` (`MSG_NOSIGNAL`): a
/// gone peer is the error `EPIPE`, not a signal that kills the caller.
pub(crate) fn send(sock: RawFd, data: &[u8], fds: &[RawFd]) -> io::Result<()> {
    let mut iov = libc::iovec {
        iov_base: data.as_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    let payload = std::mem::size_of_val(fds);
    // SAFETY: CMSG_SPACE is a pure computation on a length.
    let space = unsafe { libc::CMSG_SPACE(payload as u32) } as usize;
    // u64 words keep the control buffer aligned as `cmsghdr` requires.
    let mut control = vec![0u64; space.div_ceil(8)];
    // SAFETY: an all-zero msghdr is a valid value; the fields are set below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if !fds.is_empty() {
        msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = space;
        // SAFETY: the control buffer holds CMSG_SPACE(payload) bytes, so the first header and
        // its data fit; CMSG_FIRSTHDR is non-null because msg_controllen >= sizeof(cmsghdr).
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(payload as u32) as usize;
            std::ptr::copy_nonoverlapping(
                fds.as_ptr() as *const u8,
                libc::CMSG_DATA(cmsg),
                payload,
            );
        }
    }
    loop {
        // SAFETY: `msg` points to the iovec and control buffer above, alive for the call.
        let ret = unsafe { libc::sendmsg(sock, &msg, libc::MSG_NOSIGNAL) };
        if ret >= 0 {
            // A SOCK_SEQPACKET datagram is sent whole or not at all.
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// One received datagram: its length in `buf` and the descriptors that came with it, already
/// owned (close-on-exec, thanks to `MSG_CMSG_CLOEXEC`). `None` at end of file: the peer is gone
/// (neither side ever sends an empty datagram, so a zero-length read can only mean that).
pub(crate) fn recv(sock: RawFd, buf: &mut [u8]) -> io::Result<Option<(usize, Vec<OwnedFd>)>> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: CMSG_SPACE is a pure computation on a length.
    let space =
        unsafe { libc::CMSG_SPACE((MAX_FDS * std::mem::size_of::<RawFd>()) as u32) } as usize;
    let mut control = vec![0u64; space.div_ceil(8)];
    // SAFETY: an all-zero msghdr is a valid value; the fields are set below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = space;
    let n = loop {
        // SAFETY: `msg` points to `buf` and the control buffer, both alive for the call.
        let ret = unsafe { libc::recvmsg(sock, &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if ret >= 0 {
            break ret as usize;
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    };
    let mut fds = Vec::new();
    // SAFETY: the kernel filled the control buffer and msg_controllen; the CMSG_* macros walk
    // headers within it, and each SCM_RIGHTS payload holds cmsg_len - CMSG_LEN(0) bytes of
    // descriptors that are now ours.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let bytes = (*cmsg).cmsg_len - libc::CMSG_LEN(0) as usize;
                let data = libc::CMSG_DATA(cmsg) as *const RawFd;
                for i in 0..bytes / std::mem::size_of::<RawFd>() {
                    fds.push(OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.add(i))));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    if msg.msg_flags & (libc::MSG_TRUNC | libc::MSG_CTRUNC) != 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "zygote message or its descriptors were truncated",
        ));
    }
    if n == 0 && fds.is_empty() {
        return Ok(None);
    }
    Ok(Some((n, fds)))
}

/// Sends `body` as one request: a first datagram with the total length, the start of the body
/// and every descriptor, then the rest in chunks. On failure, says whether anything went out
/// (after a partial request the stream is out of step).
pub(crate) fn send_request(
    sock: RawFd,
    body: &[u8],
    fds: &[RawFd],
) -> Result<(), (bool, io::Error)> {
    let first = body.len().min(CHUNK - 4);
    let mut head = Vec::with_capacity(4 + first);
    head.extend_from_slice(&(body.len() as u32).to_ne_bytes());
    head.extend_from_slice(&body[..first]);
    send(sock, &head, fds).map_err(|e| (false, e))?;
    for chunk in body[first..].chunks(CHUNK) {
        send(sock, chunk, &[]).map_err(|e| (true, e))?;
    }
    Ok(())
}

/// Receives one request sent by [`send_request`]: `None` when the peer is gone.
pub(crate) fn recv_request(sock: RawFd) -> io::Result<Option<(Vec<u8>, Vec<OwnedFd>)>> {
    let mut buf = vec![0u8; CHUNK];
    let Some((n, fds)) = recv(sock, &mut buf)? else {
        return Ok(None);
    };
    if n < 4 {
        return Err(malformed());
    }
    let total = u32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
    let mut body = Vec::with_capacity(total);
    body.extend_from_slice(&buf[4..n]);
    while body.len() < total {
        let Some((n, more)) = recv(sock, &mut buf)? else {
            return Ok(None);
        };
        if !more.is_empty() {
            return Err(malformed());
        }
        body.extend_from_slice(&buf[..n]);
    }
    if body.len() != total {
        return Err(malformed());
    }
    Ok(Some((body, fds)))
}

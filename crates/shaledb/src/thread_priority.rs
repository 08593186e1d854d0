//! The CPU priority of the engine's background threads (`Options::background_cpu_priority`).

use crate::options::CpuPriority;

/// Sets the calling thread's CPU priority. Threads it starts afterwards inherit it (so a
/// compaction's subcompaction threads run at its priority). `Normal` changes nothing, so a
/// thread is never raised (which would need privileges).
#[cfg(target_os = "linux")]
pub(crate) fn set_current_thread(priority: CpuPriority) -> std::io::Result<()> {
    let rc = match priority {
        CpuPriority::Normal => return Ok(()),
        // SAFETY: a system call with plain integer arguments; `who` 0 names the calling
        // thread (Linux keeps a nice value per thread), nothing else is touched.
        CpuPriority::Low => unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, 19) },
        CpuPriority::Idle => {
            let param = libc::sched_param { sched_priority: 0 };
            // SAFETY: pid 0 is the calling thread; `param` is a valid, initialized struct
            // that outlives the call, which only reads it.
            unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) }
        }
    };
    match rc {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// Elsewhere a thread's priority is not set per thread: the threads keep theirs.
#[cfg(not(target_os = "linux"))]
pub(crate) fn set_current_thread(priority: CpuPriority) -> std::io::Result<()> {
    match priority {
        CpuPriority::Normal => Ok(()),
        _ => Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "per-thread CPU priority is set on Linux only",
        )),
    }
}

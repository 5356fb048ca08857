//! File descriptors: fitting `maxclients` to the process's open-files limit, as Redis does.
//!
//! Every client is a socket, and Tollgate needs descriptors of its own besides (listeners,
//! the runtime's event queue, log and snapshot files, cluster links). At start, and when
//! CONFIG SET raises `maxclients`, [`fit_maxclients`] raises the soft `RLIMIT_NOFILE` toward
//! what that needs (up to the hard limit, or past it when the process may); if it still
//! does not fit, `maxclients` is lowered so that it does, with one warning in Redis's words.
//! A client past `maxclients` then gets `-ERR max number of clients reached` while a
//! descriptor is still free to tell it so, instead of waiting unanswered in the listen
//! backlog. Should descriptors run out all the same (files opened elsewhere), the accept
//! loop sheds waiting connections through a spare descriptor ([`Spare`]).

use std::io;

/// Descriptors kept for Tollgate itself on a standalone server: Redis's
/// `CONFIG_MIN_RESERVED_FDS` (listeners, the event queue, standard streams, files).
pub const RESERVED: u64 = 32;

/// Descriptors kept for Tollgate itself: [`RESERVED`], and on a cluster node two links per
/// peer (one each way) and its log, vote and snapshot files.
pub fn reserved(peers: Option<usize>) -> u64 {
    match peers {
        None => RESERVED,
        Some(n) => RESERVED + 2 * n.max(3) as u64 + 16,
    }
}

/// The result of [`fit_maxclients`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fit {
    /// The `maxclients` that fits.
    pub maxclients: usize,
    /// The open-files limit now in force.
    pub limit: u64,
    /// The limit before, when it was raised.
    pub raised_from: Option<u64>,
    /// Redis's warning, when `maxclients` had to be lowered.
    pub warning: Option<String>,
}

/// Make room for `maxclients` clients plus `reserved` descriptors: raise the soft open-files
/// limit as far as needed and allowed, and lower `maxclients` if that is not enough. An
/// error when not even one client fits.
pub fn fit_maxclients(maxclients: usize, reserved: u64) -> Result<Fit, String> {
    let wanted = maxclients as u64 + reserved;
    let (soft, hard) = match get_limit() {
        Ok(l) => l,
        Err(e) => {
            let fit = 1024u64.saturating_sub(reserved).max(1) as usize;
            return Ok(Fit {
                maxclients: fit.min(maxclients),
                limit: 1024,
                raised_from: None,
                warning: Some(format!(
                    "Unable to obtain the current NOFILE limit ({e}), assuming 1024 and setting the max clients configuration accordingly."
                )),
            });
        }
    };
    if soft >= wanted {
        return Ok(Fit {
            maxclients,
            limit: soft,
            raised_from: None,
            warning: None,
        });
    }
    // Past the hard limit only a privileged process may go; try that first, then the most
    // the hard limit allows.
    let mut error = None;
    let mut best = soft;
    if wanted > hard {
        match set_limit(wanted, wanted) {
            Ok(()) => best = wanted,
            Err(e) => error = Some(e),
        }
    }
    if best < wanted {
        let target = wanted.min(hard);
        match set_limit(target, hard) {
            Ok(()) => best = best.max(target),
            Err(e) => error = Some(e),
        }
    }
    if best >= wanted {
        return Ok(Fit {
            maxclients,
            limit: best,
            raised_from: Some(soft),
            warning: None,
        });
    }
    if best <= reserved {
        return Err(format!(
            "Your current 'ulimit -n' of {soft} is not enough for the server to start. Please increase your open file limit to at least {wanted}. Exiting."
        ));
    }
    let fit = (best - reserved) as usize;
    let why = error.map_or_else(|| "the hard limit is lower".to_string(), |e| e.to_string());
    Ok(Fit {
        maxclients: fit,
        limit: best,
        raised_from: (best > soft).then_some(soft),
        warning: Some(format!(
            "You requested maxclients of {maxclients} requiring at least {wanted} max file descriptors. Server can't set maximum open files to {wanted} because of OS error: {why}. Current maximum open files is {best}. maxclients has been reduced to {fit} to compensate for low ulimit. If you need higher maxclients increase 'ulimit -n'."
        )),
    })
}

fn get_limit() -> io::Result<(u64, u64)> {
    let mut l = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct we pass and nothing else.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((l.rlim_cur, l.rlim_max))
}

fn set_limit(soft: u64, hard: u64) -> io::Result<()> {
    let l = libc::rlimit {
        rlim_cur: soft,
        rlim_max: hard,
    };
    // SAFETY: setrlimit reads the struct we pass.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &l) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether an accept failed for want of descriptors (`EMFILE`, `ENFILE`).
pub fn out_of_descriptors(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE))
}

/// A descriptor held in reserve: when accept fails for want of descriptors, closing it
/// frees one to take the waiting connection and refuse it (otherwise the connection stays
/// in the backlog unanswered and every accept fails again at once).
pub struct Spare(Option<std::fs::File>);

impl Spare {
    /// Hold one descriptor.
    pub fn new() -> Spare {
        Spare(std::fs::File::open("/dev/null").ok())
    }

    /// Give the descriptor back for a moment.
    pub fn release(&mut self) {
        self.0 = None;
    }

    /// Take a descriptor again (when one is free).
    pub fn restore(&mut self) {
        if self.0.is_none() {
            self.0 = std::fs::File::open("/dev/null").ok();
        }
    }
}

impl Default for Spare {
    fn default() -> Self {
        Spare::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_that_already_fits_is_left_alone() {
        let (soft, _) = get_limit().unwrap();
        let fit = fit_maxclients(1, 1).unwrap();
        assert_eq!(fit.maxclients, 1);
        assert_eq!(fit.limit, soft);
        assert!(fit.warning.is_none());
        assert_eq!(reserved(None), 32);
        assert_eq!(reserved(Some(3)), 32 + 6 + 16);
    }
}

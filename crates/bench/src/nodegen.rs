//! A node_exporter-shaped series generator for the B2 benchmark (../shared/BENCHMARKS.md).
//!
//! A [`Target`] is one simulated host: ~1,200 series with node_exporter's metric names and label shapes
//! (CPU seconds per core and mode, memory, filesystems, disks, network devices, load, vmstat, systemd
//! units, hwmon, md, timex, conntrack, …, plus the Go/process metrics and the `up`/`scrape_*` series a
//! Prometheus scrape adds), each with `instance` and `job` labels. Every metric name the 35 alerting
//! rules of `../shared/bench/node-alert-rules.txt` use is present (a unit test checks it).
//!
//! Values move the way real ones do, because compression figures depend on it: counters grow at
//! per-target rates with noise and are rounded to the precision node_exporter reports (CPU seconds to
//! 10 ms, bytes and operations to integers); gauges wander inside a band at a realistic precision
//! (memory in 4 KiB pages, load averages to 2 decimals, temperatures to 1); inventory values
//! (sizes, limits, info series, unit states) stay constant.
//!
//! Everything is deterministic from a seed (splitmix64), so two runs send the same stream.

use tessera_model::{Labels, Sample};

/// splitmix64: tiny, fast, good enough for load shapes; no dependency.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x9e37_79b9_7f4a_7c15)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in [lo, hi).
    pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.f64()
    }
}

/// How one series' value evolves per scrape.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Model {
    /// Grows by `rate_per_s · dt · U(0.5, 1.5)`, rounded to `precision`.
    Counter { rate_per_s: f64, precision: f64 },
    /// Random walk inside `[lo, hi]`, steps up to `step` of the band, rounded to `precision`.
    Gauge { lo: f64, hi: f64, step: f64, precision: f64 },
    /// Never changes.
    Const,
}

/// Bits of information per sample in a series of this model scraped every `dt_s` seconds: `log2` of the
/// number of values (in precision units) its uniform draw can take — a counter's increment spans
/// `rate · dt` (from 0.5 to 1.5 of it), a gauge's step `2 · step · band` — or, under two values, the
/// entropy of whether it moves; a constant carries none. Clamping at a gauge's band is ignored (it can
/// only lower the figure). A lower bound of what any lossless store must spend on the values, timestamps
/// (regular here) aside.
pub fn information_bits(model: &Model, dt_s: f64) -> f64 {
    let width = match *model {
        Model::Counter { rate_per_s, precision } => rate_per_s * dt_s / precision,
        Model::Gauge { lo, hi, step, precision } => 2.0 * step * (hi - lo) / precision,
        Model::Const => return 0.0,
    };
    if width >= 2.0 {
        width.log2()
    } else {
        // Rounding U(a, a + width) to integers: a change with probability about width / 2.
        let p = (width / 2.0).clamp(0.0, 0.5);
        if p <= 0.0 { 0.0 } else { -(p * p.log2() + (1.0 - p) * (1.0 - p).log2()) }
    }
}

/// Mean [`information_bits`] per sample over the series of `targets` targets, in bytes.
pub fn fleet_information_bytes(targets: usize, job: &str, seed: u64, dt_s: f64) -> f64 {
    let (mut bits, mut n) = (0.0, 0usize);
    for id in 0..targets as u64 {
        for s in Target::new(id, job, seed).series {
            bits += information_bits(&s.model, dt_s);
            n += 1;
        }
    }
    if n == 0 { 0.0 } else { bits / n as f64 / 8.0 }
}

/// One generated series and its current value.
#[derive(Debug, Clone)]
pub struct SeriesGen {
    pub labels: Labels,
    pub model: Model,
    pub value: f64,
}

/// `v` rounded to a multiple of `p`. For `p < 1` (a power of ten or `1/n`) the result is the integer
/// divided by `round(1/p)` in one IEEE division, which is what parsing the exporter's text (`0.000123456`)
/// gives; dividing by `1.0 / p` instead (999999999.9999999 for `1e-9`) gave 17-digit values that no
/// exporter sends.
fn round_to(v: f64, p: f64) -> f64 {
    if p >= 1.0 {
        (v / p).round() * p
    } else {
        let scale = (1.0 / p).round();
        (v * scale).round() / scale
    }
}

impl SeriesGen {
    /// Advances by `dt_s` seconds and returns the new value.
    pub fn step(&mut self, rng: &mut Rng, dt_s: f64) -> f64 {
        match self.model {
            Model::Counter { rate_per_s, precision } => {
                self.value = round_to(self.value + rate_per_s * dt_s * rng.range(0.5, 1.5), precision);
            }
            Model::Gauge { lo, hi, step, precision } => {
                let band = hi - lo;
                let v = (self.value + (rng.f64() - 0.5) * 2.0 * step * band).clamp(lo, hi);
                self.value = round_to(v, precision);
            }
            Model::Const => {}
        }
        self.value
    }
}

/// Cores per simulated host (fixed so that a target always has the same number of series).
pub const CPUS: usize = 16;
const CPU_MODES: [&str; 8] = ["idle", "iowait", "irq", "nice", "softirq", "steal", "system", "user"];
/// Share of one core each mode takes, summing to 1.
const CPU_MODE_SHARE: [f64; 8] = [0.62, 0.02, 0.005, 0.003, 0.012, 0.005, 0.11, 0.225];
const DISKS: [&str; 4] = ["nvme0n1", "nvme1n1", "sda", "dm-0"];
const NET_DEVICES: [&str; 5] = ["eth0", "eth1", "lo", "docker0", "bond0"];
const FILESYSTEMS: [(&str, &str, &str); 6] = [
    ("/dev/nvme0n1p2", "ext4", "/"),
    ("/dev/nvme0n1p1", "vfat", "/boot/efi"),
    ("/dev/nvme1n1", "xfs", "/data"),
    ("/dev/mapper/vg-var", "ext4", "/var"),
    ("tmpfs", "tmpfs", "/run"),
    ("tmpfs", "tmpfs", "/dev/shm"),
];
const UNIT_STATES: [&str; 5] = ["activating", "active", "deactivating", "failed", "inactive"];
const SYSTEMD_UNITS: usize = 60;
const HWMON_SENSORS: usize = 8;
const INTERRUPT_TYPES: [&str; 9] = ["LOC", "RES", "CAL", "TLB", "NMI", "PMI", "IWI", "MCP", "THR"];
const COLLECTORS: [&str; 40] = [
    "arp", "bcache", "bonding", "btrfs", "conntrack", "cpu", "cpufreq", "diskstats", "dmi", "edac",
    "entropy", "fibrechannel", "filefd", "filesystem", "hwmon", "infiniband", "ipvs", "loadavg", "mdadm", "meminfo",
    "netclass", "netdev", "netstat", "nfs", "nfsd", "nvme", "os", "powersupplyclass", "pressure", "rapl",
    "schedstat", "selinux", "sockstat", "softnet", "stat", "systemd", "tapestats", "textfile", "thermal_zone", "timex",
];
const MEMINFO: [&str; 44] = [
    "Active", "Active_anon", "Active_file", "AnonHugePages", "AnonPages", "Bounce", "Buffers", "Cached",
    "CommitLimit", "Committed_AS", "DirectMap1G", "DirectMap2M", "DirectMap4k", "Dirty", "FileHugePages",
    "FilePmdMapped", "HardwareCorrupted", "HugePages_Free", "HugePages_Rsvd", "HugePages_Surp", "HugePages_Total",
    "Hugepagesize", "Inactive", "Inactive_anon", "Inactive_file", "KReclaimable", "KernelStack", "Mapped",
    "MemAvailable", "MemFree", "MemTotal", "Mlocked", "NFS_Unstable", "PageTables", "Percpu", "SReclaimable",
    "SUnreclaim", "Shmem", "Slab", "SwapCached", "SwapFree", "SwapTotal", "Unevictable", "Writeback",
];

/// A family template: metric name, extra labels, model, initial value.
struct Def {
    name: String,
    labels: Vec<(&'static str, String)>,
    model: Model,
    initial: f64,
}

fn counter(rate_per_s: f64, precision: f64) -> Model {
    Model::Counter { rate_per_s, precision }
}

fn gauge(lo: f64, hi: f64, step: f64, precision: f64) -> Model {
    Model::Gauge { lo, hi, step, precision }
}

/// Builds the series templates of one host; `k` scales its activity (a busy host vs an idle one).
fn host_defs(rng: &mut Rng, k: f64) -> Vec<Def> {
    let mut d: Vec<Def> = Vec::with_capacity(1300);
    let mut push = |name: &str, labels: Vec<(&'static str, String)>, model: Model, initial: f64| {
        d.push(Def { name: name.to_string(), labels, model, initial });
    };
    let uptime = rng.range(1e5, 3e7);
    let mem_total = 64.0 * 1024.0 * 1024.0 * 1024.0;
    let busy = k.min(3.0) / 3.0;

    // CPU.
    for cpu in 0..CPUS {
        for (m, share) in CPU_MODES.iter().zip(CPU_MODE_SHARE) {
            let share = if *m == "idle" { share * (1.2 - busy * 0.5) } else { share * (0.5 + busy) };
            push("node_cpu_seconds_total", vec![("cpu", cpu.to_string()), ("mode", m.to_string())], counter(share, 0.01), round_to(uptime * share, 0.01));
        }
        for m in ["nice", "user"] {
            push("node_cpu_guest_seconds_total", vec![("cpu", cpu.to_string()), ("mode", m.to_string())], Model::Const, 0.0);
        }
        push("node_softnet_processed_total", vec![("cpu", cpu.to_string())], counter(300.0 * k, 1.0), (uptime * 300.0 * k).round());
        push("node_softnet_dropped_total", vec![("cpu", cpu.to_string())], counter(0.0001, 1.0), 0.0);
        push("node_softnet_times_squeezed_total", vec![("cpu", cpu.to_string())], counter(0.01 * k, 1.0), (uptime * 0.01).round());
        push("node_schedstat_running_seconds_total", vec![("cpu", cpu.to_string())], counter(0.35 * k.min(2.5), 0.000001), uptime * 0.3);
        push("node_schedstat_waiting_seconds_total", vec![("cpu", cpu.to_string())], counter(0.02 * k, 0.000001), uptime * 0.02);
        push("node_schedstat_timeslices_total", vec![("cpu", cpu.to_string())], counter(400.0 * k, 1.0), (uptime * 400.0).round());
        for t in INTERRUPT_TYPES {
            push("node_interrupts_total", vec![("cpu", cpu.to_string()), ("type", t.to_string())], counter(if t == "LOC" { 250.0 } else { 2.0 * k }, 1.0), (uptime * 2.0).round());
        }
    }
    // Memory (4 KiB page precision).
    for m in MEMINFO {
        let name = format!("node_memory_{m}_bytes");
        match m {
            "MemTotal" => push(&name, vec![], Model::Const, mem_total),
            "SwapTotal" => push(&name, vec![], Model::Const, 8.0 * 1024.0 * 1024.0 * 1024.0),
            "SwapFree" => push(&name, vec![], gauge(6.0e9, 8.5e9, 0.001, 4096.0), 8.0e9),
            "MemAvailable" => push(&name, vec![], gauge(mem_total * 0.15, mem_total * 0.7, 0.01, 4096.0), mem_total * 0.5),
            "MemFree" => push(&name, vec![], gauge(mem_total * 0.05, mem_total * 0.4, 0.01, 4096.0), mem_total * 0.2),
            "Hugepagesize" => push(&name, vec![], Model::Const, 2097152.0),
            m if m.starts_with("HugePages") || m == "HardwareCorrupted" || m == "NFS_Unstable" || m == "Bounce" => {
                push(&name, vec![], Model::Const, 0.0)
            }
            m if m.starts_with("DirectMap") || m == "CommitLimit" => push(&name, vec![], Model::Const, mem_total * 0.3),
            _ => {
                let base = rng.range(1e7, mem_total * 0.2);
                push(&name, vec![], gauge(base * 0.5, base * 1.5, 0.005, 4096.0), base)
            }
        }
    }
    // Filesystems.
    for (dev, fstype, mp) in FILESYSTEMS {
        let l = || vec![("device", dev.to_string()), ("fstype", fstype.to_string()), ("mountpoint", mp.to_string())];
        let size = (rng.range(1.0, 500.0) * 1e9 / 4096.0).round() * 4096.0;
        let files = (size / 16384.0).round();
        push("node_filesystem_size_bytes", l(), Model::Const, size);
        push("node_filesystem_avail_bytes", l(), gauge(size * 0.05, size * 0.9, 0.0005, 4096.0), size * rng.range(0.2, 0.8));
        push("node_filesystem_free_bytes", l(), gauge(size * 0.1, size * 0.95, 0.0005, 4096.0), size * rng.range(0.25, 0.85));
        push("node_filesystem_files", l(), Model::Const, files);
        push("node_filesystem_files_free", l(), gauge(files * 0.5, files, 0.0002, 1.0), files * 0.9);
        push("node_filesystem_readonly", l(), Model::Const, 0.0);
        push("node_filesystem_device_error", l(), Model::Const, 0.0);
    }
    // Disks.
    for dev in DISKS {
        let l = || vec![("device", dev.to_string())];
        let iops = rng.range(5.0, 200.0) * k;
        for (name, rate, p) in [
            ("node_disk_reads_completed_total", iops, 1.0),
            ("node_disk_writes_completed_total", iops * 1.7, 1.0),
            ("node_disk_reads_merged_total", iops * 0.1, 1.0),
            ("node_disk_writes_merged_total", iops * 0.6, 1.0),
            ("node_disk_read_bytes_total", iops * 16384.0, 512.0),
            ("node_disk_written_bytes_total", iops * 1.7 * 12288.0, 512.0),
            ("node_disk_read_time_seconds_total", iops * 0.0004, 0.001),
            ("node_disk_write_time_seconds_total", iops * 1.7 * 0.0007, 0.001),
            ("node_disk_io_time_seconds_total", (iops * 0.0008).min(0.9), 0.001),
            ("node_disk_io_time_weighted_seconds_total", iops * 0.0012, 0.001),
            ("node_disk_discards_completed_total", iops * 0.01, 1.0),
            ("node_disk_discards_merged_total", 0.0, 1.0),
            ("node_disk_discarded_sectors_total", iops * 0.01 * 256.0, 1.0),
            ("node_disk_discard_time_seconds_total", iops * 0.00001, 0.001),
            ("node_disk_flush_requests_total", iops * 0.05, 1.0),
            ("node_disk_flush_requests_time_seconds_total", iops * 0.00002, 0.001),
        ] {
            push(name, l(), counter(rate, p), round_to(uptime * rate, p));
        }
        push("node_disk_io_now", l(), gauge(0.0, 8.0, 0.2, 1.0), 0.0);
    }
    // Network.
    for dev in NET_DEVICES {
        let l = || vec![("device", dev.to_string())];
        let pps = if dev == "lo" { 50.0 } else { rng.range(100.0, 5000.0) * k };
        for dir in ["receive", "transmit"] {
            let f = if dir == "receive" { 1.0 } else { 0.8 };
            for (what, rate) in [
                ("bytes", pps * f * 700.0),
                ("packets", pps * f),
                ("errs", 0.0005),
                ("drop", 0.002),
                ("fifo", 0.0),
                ("compressed", 0.0),
                ("multicast", 0.05),
                (if dir == "receive" { "frame" } else { "colls" }, 0.0),
            ] {
                push(&format!("node_network_{dir}_{what}_total"), l(), counter(rate, 1.0), (uptime * rate).round());
            }
        }
        push("node_network_speed_bytes", l(), Model::Const, if dev == "lo" { 0.0 } else { 1.25e9 });
        push("node_network_up", l(), Model::Const, 1.0);
        push("node_network_mtu_bytes", l(), Model::Const, if dev == "lo" { 65536.0 } else { 1500.0 });
        push("node_network_carrier", l(), Model::Const, 1.0);
        push("node_network_transmit_queue_length", l(), Model::Const, 1000.0);
        push("node_network_iface_id", l(), Model::Const, 2.0);
    }
    // Load, vmstat, stat, entropy, conntrack, timex, misc.
    let load = 16.0 * busy;
    push("node_load1", vec![], gauge(0.0, load * 2.0 + 0.5, 0.05, 0.01), load);
    push("node_load5", vec![], gauge(0.0, load * 1.6 + 0.5, 0.02, 0.01), load);
    push("node_load15", vec![], gauge(0.0, load * 1.3 + 0.5, 0.01, 0.01), load);
    for (name, rate) in [
        ("node_vmstat_pgfault", 5000.0 * k),
        ("node_vmstat_pgmajfault", 0.5 * k),
        ("node_vmstat_pgpgin", 400.0 * k),
        ("node_vmstat_pgpgout", 900.0 * k),
        ("node_vmstat_pswpin", 0.001),
        ("node_vmstat_pswpout", 0.002),
        ("node_vmstat_oom_kill", 0.0),
    ] {
        push(name, vec![], counter(rate, 1.0), (uptime * rate).round());
    }
    push("node_context_switches_total", vec![], counter(20000.0 * k, 1.0), (uptime * 20000.0).round());
    push("node_intr_total", vec![], counter(15000.0 * k, 1.0), (uptime * 15000.0).round());
    push("node_forks_total", vec![], counter(20.0 * k, 1.0), (uptime * 20.0).round());
    push("node_boot_time_seconds", vec![], Model::Const, 1.7e9);
    push("node_time_seconds", vec![], counter(1.0, 0.001), 1.7e9 + uptime);
    push("node_procs_running", vec![], gauge(1.0, 4.0 + 16.0 * busy, 0.1, 1.0), 2.0);
    push("node_procs_blocked", vec![], gauge(0.0, 3.0, 0.1, 1.0), 0.0);
    push("node_entropy_available_bits", vec![], Model::Const, 256.0);
    push("node_entropy_pool_size_bits", vec![], Model::Const, 256.0);
    push("node_filefd_allocated", vec![], gauge(2000.0, 40000.0, 0.01, 1.0), 9000.0);
    push("node_filefd_maximum", vec![], Model::Const, 9.223372036854776e18);
    push("node_nf_conntrack_entries", vec![], gauge(100.0, 60000.0, 0.01, 1.0), 3000.0);
    push("node_nf_conntrack_entries_limit", vec![], Model::Const, 262144.0);
    for (name, model, init) in [
        ("node_timex_offset_seconds", gauge(-0.002, 0.002, 0.05, 1e-9), 0.0),
        ("node_timex_sync_status", Model::Const, 1.0),
        ("node_timex_maxerror_seconds", gauge(0.0, 0.5, 0.05, 1e-6), 0.1),
        ("node_timex_estimated_error_seconds", gauge(0.0, 0.01, 0.05, 1e-6), 0.001),
        ("node_timex_frequency_adjustment_ratio", gauge(0.99999, 1.00001, 0.01, 1e-9), 1.0),
        ("node_timex_status", Model::Const, 8193.0),
    ] {
        push(name, vec![], model, init);
    }
    // netstat / sockstat.
    for n in [
        "Icmp_InErrors", "Icmp_InMsgs", "Icmp_OutMsgs", "Icmp6_InErrors", "Icmp6_InMsgs", "Icmp6_OutMsgs", "Ip_Forwarding",
        "Ip6_InOctets", "Ip6_OutOctets", "IpExt_InOctets", "IpExt_OutOctets", "TcpExt_ListenDrops", "TcpExt_ListenOverflows",
        "TcpExt_SyncookiesFailed", "TcpExt_SyncookiesRecv", "TcpExt_SyncookiesSent", "TcpExt_TCPSynRetrans", "TcpExt_TCPTimeouts",
        "Tcp_ActiveOpens", "Tcp_CurrEstab", "Tcp_InErrs", "Tcp_InSegs", "Tcp_OutRsts", "Tcp_OutSegs", "Tcp_PassiveOpens",
        "Tcp_RetransSegs", "Udp_InDatagrams", "Udp_InErrors", "Udp_NoPorts", "Udp_OutDatagrams",
    ] {
        let name = format!("node_netstat_{n}");
        if n == "Tcp_CurrEstab" {
            push(&name, vec![], gauge(10.0, 2000.0, 0.02, 1.0), 200.0);
        } else if n == "Ip_Forwarding" {
            push(&name, vec![], Model::Const, 1.0);
        } else {
            let r = rng.range(0.0, 50.0) * k;
            push(&name, vec![], counter(r, 1.0), (uptime * r).round());
        }
    }
    for n in [
        "FRAG_inuse", "FRAG_memory", "RAW_inuse", "TCP_alloc", "TCP_inuse", "TCP_mem", "TCP_mem_bytes", "TCP_orphan",
        "TCP_tw", "UDPLITE_inuse", "UDP_inuse", "UDP_mem", "UDP_mem_bytes", "sockets_used", "TCP6_inuse",
    ] {
        push(&format!("node_sockstat_{n}"), vec![], gauge(0.0, 5000.0, 0.01, 1.0), rng.range(0.0, 1000.0).round());
    }
    // systemd: one state of five is 1 per unit.
    for u in 0..SYSTEMD_UNITS {
        let failed = rng.f64() < 0.01;
        for s in UNIT_STATES {
            let on = if failed { s == "failed" } else { s == "active" };
            push(
                "node_systemd_unit_state",
                vec![("name", format!("svc-{u:02}.service")), ("state", s.to_string()), ("type", "simple".to_string())],
                Model::Const,
                if on { 1.0 } else { 0.0 },
            );
        }
    }
    // hwmon.
    for s in 0..HWMON_SENSORS {
        let l = || vec![("chip", "platform_coretemp_0".to_string()), ("sensor", format!("temp{}", s + 1))];
        push("node_hwmon_temp_celsius", l(), gauge(30.0, 85.0, 0.03, 1.0), rng.range(40.0, 60.0).round());
        push("node_hwmon_temp_max_celsius", l(), Model::Const, 100.0);
        push("node_hwmon_temp_crit_alarm_celsius", l(), Model::Const, 0.0);
        push("node_hwmon_temp_alarm", l(), Model::Const, 0.0);
    }
    // md, edac, bonding, uname.
    push("node_md_disks_required", vec![("device", "md0".into())], Model::Const, 2.0);
    for (s, v) in [("active", 2.0), ("failed", 0.0), ("spare", 0.0)] {
        push("node_md_disks", vec![("device", "md0".into()), ("state", s.into())], Model::Const, v);
    }
    for c in 0..2 {
        push("node_edac_correctable_errors_total", vec![("controller", c.to_string())], counter(0.00001, 1.0), 0.0);
        push("node_edac_uncorrectable_errors_total", vec![("controller", c.to_string())], Model::Const, 0.0);
    }
    push("node_bonding_active", vec![("master", "bond0".into())], Model::Const, 2.0);
    push("node_bonding_slaves", vec![("master", "bond0".into())], Model::Const, 2.0);
    push(
        "node_uname_info",
        vec![
            ("domainname", "(none)".into()),
            ("machine", "x86_64".into()),
            ("nodename", format!("host-{}", rng.next_u64() % 100000)),
            ("release", "6.8.0-45-generic".into()),
            ("sysname", "Linux".into()),
            ("version", "#45-Ubuntu SMP PREEMPT_DYNAMIC".into()),
        ],
        Model::Const,
        1.0,
    );
    // Exporter self-metrics.
    for c in COLLECTORS {
        push("node_scrape_collector_duration_seconds", vec![("collector", c.into())], gauge(0.00001, 0.05, 0.1, 1e-9), 0.001);
        push("node_scrape_collector_success", vec![("collector", c.into())], Model::Const, 1.0);
    }
    for q in ["0", "0.25", "0.5", "0.75", "1"] {
        push("go_gc_duration_seconds", vec![("quantile", q.into())], gauge(0.00001, 0.01, 0.2, 1e-9), 0.0005);
    }
    push("go_gc_duration_seconds_sum", vec![], counter(0.0005, 1e-9), 3.2);
    push("go_gc_duration_seconds_count", vec![], counter(0.1, 1.0), 12000.0);
    push("go_goroutines", vec![], gauge(5.0, 12.0, 0.1, 1.0), 8.0);
    push("go_threads", vec![], Model::Const, 12.0);
    push("go_info", vec![("version", "go1.23.4".into())], Model::Const, 1.0);
    for n in [
        "alloc_bytes", "alloc_bytes_total", "buck_hash_sys_bytes", "frees_total", "gc_sys_bytes", "heap_alloc_bytes",
        "heap_idle_bytes", "heap_inuse_bytes", "heap_objects", "heap_released_bytes", "heap_sys_bytes", "last_gc_time_seconds",
        "lookups_total", "mallocs_total", "mcache_inuse_bytes", "mcache_sys_bytes", "mspan_inuse_bytes", "mspan_sys_bytes",
        "next_gc_bytes", "other_sys_bytes", "stack_inuse_bytes", "stack_sys_bytes", "sys_bytes",
    ] {
        let name = format!("go_memstats_{n}");
        if n.ends_with("_total") {
            push(&name, vec![], counter(20000.0, 1.0), 1e9);
        } else {
            push(&name, vec![], gauge(1e6, 3e7, 0.02, 8.0), 1e7);
        }
    }
    push("process_cpu_seconds_total", vec![], counter(0.02 * k, 0.01), uptime * 0.02);
    push("process_max_fds", vec![], Model::Const, 1048576.0);
    push("process_open_fds", vec![], gauge(8.0, 12.0, 0.1, 1.0), 10.0);
    push("process_resident_memory_bytes", vec![], gauge(1.5e7, 3e7, 0.01, 4096.0), 2e7);
    push("process_start_time_seconds", vec![], Model::Const, 1.7e9);
    push("process_virtual_memory_bytes", vec![], gauge(1.2e9, 1.3e9, 0.001, 4096.0), 1.25e9);
    push("promhttp_metric_handler_errors_total", vec![("cause", "encoding".into())], Model::Const, 0.0);
    push("promhttp_metric_handler_errors_total", vec![("cause", "gathering".into())], Model::Const, 0.0);
    for code in ["200", "500", "503"] {
        push("promhttp_metric_handler_requests_total", vec![("code", code.into())], counter(if code == "200" { 0.1 } else { 0.0 }, 1.0), 1000.0);
    }
    // What a Prometheus scrape adds.
    push("up", vec![], Model::Const, 1.0);
    push("scrape_duration_seconds", vec![], gauge(0.01, 0.2, 0.1, 1e-6), 0.05);
    push("scrape_samples_scraped", vec![], Model::Const, 1200.0);
    push("scrape_samples_post_metric_relabeling", vec![], Model::Const, 1200.0);
    push("scrape_series_added", vec![], Model::Const, 0.0);
    d
}

/// One simulated host.
#[derive(Debug, Clone)]
pub struct Target {
    pub instance: String,
    pub series: Vec<SeriesGen>,
    rng: Rng,
}

impl Target {
    /// Target `id` (unique over the run, churn included) of job `job`.
    pub fn new(id: u64, job: &str, seed: u64) -> Self {
        let mut rng = Rng::new(seed ^ id.wrapping_mul(0x2545_f491_4f6c_dd1d));
        let k = rng.range(0.2, 5.0);
        let instance = format!("host-{id:06}:9100");
        let defs = host_defs(&mut rng, k);
        let series = defs
            .into_iter()
            .map(|d| {
                let mut pairs: Vec<(String, String)> = Vec::with_capacity(d.labels.len() + 3);
                pairs.push(("__name__".into(), d.name));
                pairs.push(("instance".into(), instance.clone()));
                pairs.push(("job".into(), job.to_string()));
                pairs.extend(d.labels.into_iter().map(|(n, v)| (n.to_string(), v)));
                SeriesGen { labels: Labels::from_pairs(pairs), model: d.model, value: d.initial }
            })
            .collect();
        Target { instance, series, rng }
    }

    /// Advances every series by one scrape of `dt_s` seconds at `t_ms` and hands each sample to `f`.
    pub fn scrape(&mut self, t_ms: i64, dt_s: f64, mut f: impl FnMut(&Labels, Sample)) {
        for s in &mut self.series {
            let v = s.step(&mut self.rng, dt_s);
            f(&s.labels, Sample::new(t_ms, v));
        }
    }
}

/// Metadata of every family a target exposes (type from the name, a help text), as remote write sends.
pub fn metadata_for(target: &Target) -> Vec<tessera_protocol::remote_write::Metadata> {
    use tessera_protocol::remote_write::{Metadata, MetricType};
    let mut names: Vec<&str> = target.series.iter().map(|s| s.labels.metric_name()).collect();
    names.sort_unstable();
    names.dedup();
    names
        .into_iter()
        .map(|n| {
            let kind = if n.ends_with("_total") || n.starts_with("node_vmstat_") || n.ends_with("_count") || n.ends_with("_sum") {
                MetricType::Counter
            } else if n == "go_gc_duration_seconds" {
                MetricType::Summary
            } else {
                MetricType::Gauge
            };
            let unit = if n.contains("_seconds") {
                "seconds"
            } else if n.contains("_bytes") {
                "bytes"
            } else {
                ""
            };
            Metadata { metric_family_name: n.to_string(), kind, help: format!("Generated {n} (node_exporter shape)."), unit: unit.to_string() }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_has_about_1200_unique_well_formed_series() {
        let t = Target::new(7, "node", 1);
        let n = t.series.len();
        assert!((1150..=1250).contains(&n), "{n} series");
        let mut seen = std::collections::HashSet::new();
        for s in &t.series {
            assert!(seen.insert(s.labels.clone()), "duplicate {}", s.labels);
            assert_eq!(s.labels.get("instance"), "host-000007:9100");
            assert_eq!(s.labels.get("job"), "node");
            assert!(!s.labels.metric_name().is_empty());
            assert!(s.labels.iter().zip(s.labels.iter().skip(1)).all(|(a, b)| a.name < b.name));
        }
        // Same id and seed: same target.
        let u = Target::new(7, "node", 1);
        assert_eq!(t.series.iter().map(|s| &s.labels).collect::<Vec<_>>(), u.series.iter().map(|s| &s.labels).collect::<Vec<_>>());
    }

    #[test]
    fn every_alert_rule_metric_is_generated() {
        let Some(path) = tessera_model::fixtures::shared("bench/node-alert-rules.txt", "every_alert_rule_metric_is_generated") else {
            return;
        };
        let rules = std::fs::read_to_string(path).expect("rules file readable");
        let t = Target::new(1, "node", 1);
        let names: std::collections::HashSet<&str> = t.series.iter().map(|s| s.labels.metric_name()).collect();
        let mut missing = Vec::new();
        for word in rules.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
            if word.starts_with("node_") && !names.contains(word) {
                missing.push(word.to_string());
            }
        }
        missing.sort();
        missing.dedup();
        assert!(missing.is_empty(), "metrics used by the rules but not generated: {missing:?}");
        // And the label values the rules select on exist.
        assert!(t.series.iter().any(|s| s.labels.metric_name() == "node_cpu_seconds_total" && s.labels.get("mode") == "steal"));
        assert!(t.series.iter().any(|s| s.labels.metric_name() == "node_systemd_unit_state" && s.labels.get("state") == "failed"));
        assert!(t.series.iter().any(|s| s.labels.metric_name() == "node_md_disks" && s.labels.get("state") == "active"));
    }

    #[test]
    fn information_content_follows_the_draws() {
        // A counter of 100 units a second scraped every 10 s at unit precision: increments span 1000 values.
        let c = Model::Counter { rate_per_s: 100.0, precision: 1.0 };
        assert!((information_bits(&c, 10.0) - 1000f64.log2()).abs() < 1e-9);
        assert_eq!(information_bits(&Model::Const, 10.0), 0.0);
        // A counter that moves one unit about every other scrape: one bit.
        let slow = Model::Counter { rate_per_s: 0.1, precision: 1.0 };
        assert!((information_bits(&slow, 10.0) - 1.0).abs() < 1e-9);
        let g = Model::Gauge { lo: 0.0, hi: 100.0, step: 0.1, precision: 0.01 };
        assert!((information_bits(&g, 10.0) - 2000f64.log2()).abs() < 1e-9);
        // The fleet: between 4 and 8 bits a sample.
        let b = fleet_information_bytes(3, "node", 1, 10.0);
        assert!((0.5..1.0).contains(&b), "{b}");
    }

    #[test]
    fn counters_never_decrease_and_gauges_stay_in_band() {
        let mut t = Target::new(3, "node", 9);
        let before: Vec<f64> = t.series.iter().map(|s| s.value).collect();
        for i in 0..50 {
            t.scrape(i * 10_000, 10.0, |_, _| {});
        }
        for (s, b) in t.series.iter().zip(before) {
            match s.model {
                Model::Counter { .. } => assert!(s.value >= b, "{} went down", s.labels),
                Model::Gauge { lo, hi, .. } => assert!(s.value >= lo - 4096.0 && s.value <= hi + 4096.0, "{} = {}", s.labels, s.value),
                Model::Const => assert_eq!(s.value, b),
            }
            assert!(s.value.is_finite());
        }
        // Every value is what an exporter's text gives: for a precision of 10^-k, the integer m with
        // value = m / 10^k (a nanosecond duration reads back from "0.000123456").
        for s in &t.series {
            let p = match s.model {
                Model::Counter { precision, .. } | Model::Gauge { precision, .. } => precision,
                Model::Const => continue,
            };
            if p < 1.0 {
                let scale = (1.0 / p).round();
                let m = (s.value * scale).round();
                assert_eq!(m / scale, s.value, "{} = {:?} is not a multiple of {p}", s.labels, s.value);
                if p == 1e-9 {
                    assert_eq!(format!("{}", s.value).parse::<f64>().ok(), Some(m / 1e9));
                    assert!(format!("{}", s.value).len() <= 22, "{} prints as {}", s.labels, s.value);
                }
            }
        }
        // CPU seconds keep node_exporter's 10 ms precision.
        let cpu = t.series.iter().find(|s| s.labels.metric_name() == "node_cpu_seconds_total").expect("cpu");
        assert!(((cpu.value * 100.0).round() - cpu.value * 100.0).abs() < 1e-6);
    }
}

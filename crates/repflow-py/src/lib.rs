//! `repflow._core`: the PyO3 module behind the `repflow` Python package.
//!
//! Thin conversions only: configurations cross as JSON text, records as Arrow (the C data
//! interface's PyCapsules), counters and summaries as JSON text. All logic lives in the Rust
//! crates.

use arrow_array::ffi::{FFI_ArrowArray, FFI_ArrowSchema};
use arrow_array::{Array, ArrayRef, Float64Array, Int64Array, StructArray};
use arrow_schema::{DataType, Field, Fields};
use pyo3::buffer::PyBuffer;
use pyo3::create_exception;
use pyo3::exceptions::{PyKeyboardInterrupt, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyCapsule, PyDict, PyList, PyString};
use repflow_sim::metrics::{record_columns, BinStats, Column, Counters, FlowRecord, Summary};
use repflow_sim::units::{Bytes, Duration, Rate};
use repflow_sim::workload::{Cdf, SizeUnit, BUILTIN};
use repflow_sim::{Config, Progress, SimError};

use std::ffi::CString;
use std::sync::Arc;

mod net;
mod proxy;

create_exception!(
    _core,
    ConfigError,
    PyValueError,
    "A configuration or input file that cannot be used; the message names the field."
);

fn config_err(e: impl std::fmt::Display) -> PyErr {
    ConfigError::new_err(e.to_string())
}

/// Parses and validates a JSON configuration; returns it normalized with every default.
#[pyfunction]
fn validate_config(config_json: &str) -> PyResult<String> {
    let cfg = Config::from_json(config_json).map_err(config_err)?;
    serde_json::to_string(&cfg).map_err(config_err)
}

/// The default configuration as JSON.
#[pyfunction]
fn default_config() -> PyResult<String> {
    serde_json::to_string(&Config::default()).map_err(config_err)
}

/// Every scheme's parameters with their defaults, as JSON: `{name: {parameter: default}}`,
/// in the simulator's registry order.
#[pyfunction]
fn scheme_defaults() -> PyResult<String> {
    let mut all = serde_json::Map::new();
    for name in repflow_sim::scheme::SchemeConfig::NAMES {
        let scheme = repflow_sim::scheme::SchemeConfig::with_defaults(name)
            .expect("every registered name has defaults");
        let mut v = serde_json::to_value(&scheme).map_err(config_err)?;
        if let Some(m) = v.as_object_mut() {
            m.remove("name");
        }
        all.insert(name.to_string(), v);
    }
    serde_json::to_string(&all).map_err(config_err)
}

/// Built-in workloads as `(name, file name)` pairs.
#[pyfunction]
fn builtin_workloads() -> Vec<(&'static str, &'static str)> {
    BUILTIN.iter().map(|(n, f, _)| (*n, *f)).collect()
}

/// Text of a built-in workload, or `None`.
#[pyfunction]
fn workload_text(name: &str) -> Option<&'static str> {
    repflow_sim::workload::builtin_text(name)
}

/// Parses a CDF text (either format); returns `{"points": [(size, cum)], "unit": "bytes" |
/// "packets", "unit_bytes": int, "mean_bytes": float}`. Raises `ConfigError` naming the line.
#[pyfunction]
fn parse_cdf<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyDict>> {
    let cdf = Cdf::parse(text).map_err(config_err)?;
    let d = PyDict::new(py);
    d.set_item("points", cdf.points.clone())?;
    d.set_item(
        "unit",
        match cdf.unit {
            SizeUnit::Bytes => "bytes",
            SizeUnit::Packets => "packets",
        },
    )?;
    d.set_item(
        "unit_bytes",
        match cdf.unit {
            SizeUnit::Bytes => 1u64,
            SizeUnit::Packets => repflow_sim::workload::CDF_PACKET_BYTES,
        },
    )?;
    d.set_item("mean_bytes", cdf.mean_bytes())?;
    Ok(d)
}

/// Columns in Arrow's memory layout (flow records, schedules, sampled sizes), handed to Python
/// through the Arrow PyCapsule interface: `pyarrow.record_batch(obj)` (or any Arrow library)
/// imports it without copying.
#[pyclass(frozen, module = "repflow._core")]
struct ArrowBatch {
    data: StructArray,
}

impl ArrowBatch {
    /// The batch of `records`, with the columns and types of `repflow_sim::metrics`.
    fn from_records(records: &[FlowRecord]) -> ArrowBatch {
        ArrowBatch::from_columns(record_columns(records))
    }

    /// A batch of named columns of equal length.
    fn from_columns(columns: Vec<(&str, Column)>) -> ArrowBatch {
        let mut fields = Vec::new();
        let mut arrays: Vec<ArrayRef> = Vec::new();
        for (name, col) in columns {
            let (ty, array): (DataType, ArrayRef) = match col {
                Column::Int64(v) => (DataType::Int64, Arc::new(Int64Array::from(v))),
                Column::Float64(v) => (DataType::Float64, Arc::new(Float64Array::from(v))),
            };
            // Nullable as pyarrow makes fields by default, so files keep their schema; no
            // value is ever null (unfinished flows have NaN times, winner −1).
            fields.push(Field::new(name, ty, true));
            arrays.push(array);
        }
        let data = StructArray::new(Fields::from(fields), arrays, None);
        ArrowBatch { data }
    }
}

fn capsule_name(name: &str) -> CString {
    CString::new(name).expect("capsule names have no NUL")
}

#[pymethods]
impl ArrowBatch {
    /// The schema (a struct type) as an `arrow_schema` PyCapsule.
    fn __arrow_c_schema__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyCapsule>> {
        let schema = FFI_ArrowSchema::try_from(self.data.data_type())
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        PyCapsule::new(py, schema, Some(capsule_name("arrow_schema")))
    }

    /// The schema and the data as `arrow_schema` and `arrow_array` PyCapsules. A requested
    /// schema is ignored: the batch has one layout.
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_array__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<(Bound<'py, PyCapsule>, Bound<'py, PyCapsule>)> {
        let _ = requested_schema;
        let array = FFI_ArrowArray::new(&self.data.to_data());
        Ok((
            self.__arrow_c_schema__(py)?,
            PyCapsule::new(py, array, Some(capsule_name("arrow_array")))?,
        ))
    }

    /// The columns' names, in order.
    #[getter]
    fn column_names(&self) -> Vec<String> {
        self.data
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect()
    }

    /// Number of records.
    fn __len__(&self) -> usize {
        self.data.len()
    }
}

/// The record schema as an empty [`ArrowBatch`]: `pyarrow.record_batch(record_schema()).schema`
/// gives the column names and types every `flows.parquet` has.
#[pyfunction]
fn record_schema() -> ArrowBatch {
    ArrowBatch::from_records(&[])
}

/// Writes an [`ArrowBatch`] of records (int64 and float64 columns) as a Parquet file at
/// `path` with the core's own writer (`repflow_sim::parquet`), so that saving a run needs no
/// Parquet library in Python. The options are the writer's layout (tests use small ones).
/// Raises `OSError` naming the path when the file cannot be written (a partial file is
/// removed), `ValueError` for unusable options.
#[pyfunction]
#[pyo3(signature = (batch, path, rows_per_group=None, values_per_page=None, max_dictionary=None))]
fn write_parquet(
    py: Python<'_>,
    batch: &ArrowBatch,
    path: std::path::PathBuf,
    rows_per_group: Option<usize>,
    values_per_page: Option<usize>,
    max_dictionary: Option<usize>,
) -> PyResult<()> {
    use repflow_sim::parquet::{self, ColumnData, ParquetOptions};
    let mut opts = ParquetOptions::default();
    opts.rows_per_group = rows_per_group.unwrap_or(opts.rows_per_group);
    opts.values_per_page = values_per_page.unwrap_or(opts.values_per_page);
    opts.max_dictionary = max_dictionary.unwrap_or(opts.max_dictionary);
    let data = &batch.data;
    let mut columns = Vec::with_capacity(data.num_columns());
    for (field, array) in data.fields().iter().zip(data.columns()) {
        let values = if let Some(a) = array.as_any().downcast_ref::<Int64Array>() {
            ColumnData::Int64(a.values())
        } else if let Some(a) = array.as_any().downcast_ref::<Float64Array>() {
            ColumnData::Float64(a.values())
        } else {
            return Err(PyValueError::new_err(format!(
                "write_parquet: column '{}' is {}, not int64 or float64",
                field.name(),
                field.data_type()
            )));
        };
        columns.push((field.name().as_str(), values));
    }
    let shown = path.display().to_string();
    py.allow_threads(|| {
        let file = std::fs::File::create(&path)?;
        let result = parquet::write_parquet(std::io::BufWriter::new(file), &columns, &opts);
        if result.is_err() {
            let _ = std::fs::remove_file(&path);
        }
        result
    })
    .map_err(|e| match e {
        parquet::ParquetError::Io(io) => {
            pyo3::exceptions::PyOSError::new_err(format!("{shown}: {io}"))
        }
        other => PyValueError::new_err(other.to_string()),
    })
}

/// The CDF of `parse_cdf`'s `points` and `unit`, checked by the one CDF parser.
fn cdf_of(points: Vec<(f64, f64)>, unit: &str) -> PyResult<Cdf> {
    let packets = match unit {
        "bytes" => false,
        "packets" => true,
        _ => {
            return Err(config_err(format!(
                "cdf unit: '{unit}' is not 'bytes' or 'packets'"
            )))
        }
    };
    // Rust prints a float with the fewest digits that read back to the same value, so the
    // text round trip keeps every point exactly.
    let text: String = points
        .iter()
        .map(|(x, c)| {
            if packets {
                format!("{x} 1 {c}\n")
            } else {
                format!("{x} {c}\n")
            }
        })
        .collect();
    Cdf::parse(&text).map_err(config_err)
}

/// `n` flow sizes (bytes) drawn from a CDF (`parse_cdf`'s `points` and `unit`) by the
/// simulator's sampler, with random stream 0 of `seed`; a batch with one column `size`.
#[pyfunction]
fn sample_sizes(points: Vec<(f64, f64)>, unit: &str, n: usize, seed: u64) -> PyResult<ArrowBatch> {
    let cdf = cdf_of(points, unit)?;
    let mut rng = repflow_sim::engine::Rng::new(seed, 0);
    let sizes = (0..n).map(|_| cdf.sample(&mut rng) as i64).collect();
    Ok(ArrowBatch::from_columns(vec![(
        "size",
        Column::Int64(sizes),
    )]))
}

/// One host's open-loop schedule (`repflow_sim::workload::host_schedule`): Poisson arrivals at
/// `load` × `link_rate_bps` until `duration` seconds, sizes from the CDF, peers uniform over
/// `0..peers`. A batch with columns `at` (seconds), `peer` and `size` (bytes).
#[pyfunction]
fn host_schedule(
    points: Vec<(f64, f64)>,
    unit: &str,
    load: f64,
    link_rate_bps: f64,
    duration: f64,
    peers: u32,
    seed: u64,
) -> PyResult<ArrowBatch> {
    if !(load > 0.0 && load.is_finite()) {
        return Err(config_err(format!("load: must be positive, got {load}")));
    }
    if !(link_rate_bps >= 1.0 && link_rate_bps.is_finite()) {
        return Err(config_err(format!(
            "link rate: must be at least 1 bps, got {link_rate_bps}"
        )));
    }
    if !(duration >= 0.0 && duration.is_finite()) {
        return Err(config_err(format!(
            "duration: must be a non-negative number of seconds, got {duration}"
        )));
    }
    let cdf = cdf_of(points, unit)?;
    let until = Duration::from_secs(duration).ps();
    let arrivals =
        repflow_sim::workload::host_schedule(&cdf, load, link_rate_bps, peers, until, seed)
            .ok_or_else(|| config_err("peers: give at least one peer"))?;
    let at = arrivals.iter().map(|a| Duration(a.time).secs()).collect();
    let peer = arrivals.iter().map(|a| i64::from(a.dst)).collect();
    let size = arrivals.iter().map(|a| a.size as i64).collect();
    Ok(ArrowBatch::from_columns(vec![
        ("at", Column::Float64(at)),
        ("peer", Column::Int64(peer)),
        ("size", Column::Int64(size)),
    ]))
}

/// The values of a one-dimensional buffer (e.g. a numpy array) of int64 that must not be
/// negative, as `u64`.
fn non_negative(buf: &PyBuffer<i64>, py: Python<'_>, what: &str) -> PyResult<Vec<u64>> {
    buf.to_vec(py)?
        .into_iter()
        .map(|v| {
            u64::try_from(v).map_err(|_| PyValueError::new_err(format!("{what}: {v} is negative")))
        })
        .collect()
}

/// The summary of flows given as columns (`repflow_sim::metrics::Summary::from_columns`):
/// int64 `size` and `copies`, float64 `fct` and `slowdown` (NaN when unfinished), as buffers
/// (numpy arrays). The overhead is `extra_copy_bytes / flow_bytes`; when the counters are not
/// given they are counted from the sizes and copies as the simulator counts them. Returns
/// the summary as JSON text (NaN as null), like `simulate`.
#[pyfunction]
#[pyo3(signature = (size, fct, slowdown, copies, flow_bytes=None, extra_copy_bytes=None))]
fn summarize(
    py: Python<'_>,
    size: PyBuffer<i64>,
    fct: PyBuffer<f64>,
    slowdown: PyBuffer<f64>,
    copies: PyBuffer<i64>,
    flow_bytes: Option<u64>,
    extra_copy_bytes: Option<u64>,
) -> PyResult<String> {
    let size = non_negative(&size, py, "size")?;
    let copies = non_negative(&copies, py, "copies")?;
    let (fct, slowdown) = (fct.to_vec(py)?, slowdown.to_vec(py)?);
    if [copies.len(), fct.len(), slowdown.len()] != [size.len(); 3] {
        return Err(PyValueError::new_err(
            "size, fct, slowdown and copies must have the same length",
        ));
    }
    let mut counters = Counters::of_copies(&size, &copies);
    if let Some(b) = flow_bytes {
        counters.flow_bytes = b;
    }
    if let Some(b) = extra_copy_bytes {
        counters.extra_copy_bytes = b;
    }
    let summary = Summary::from_columns(&size, &fct, &slowdown, &counters);
    serde_json::to_string(&summary).map_err(config_err)
}

/// FCT and slowdown statistics of one group of flows (`BinStats::of`) as JSON text.
#[pyfunction]
fn bin_stats(
    py: Python<'_>,
    label: &str,
    fct: PyBuffer<f64>,
    slowdown: PyBuffer<f64>,
) -> PyResult<String> {
    let (fct, slowdown) = (fct.to_vec(py)?, slowdown.to_vec(py)?);
    if fct.len() != slowdown.len() {
        return Err(PyValueError::new_err(
            "fct and slowdown must have the same length",
        ));
    }
    serde_json::to_string(&BinStats::of(label, &fct, &slowdown)).map_err(config_err)
}

/// Runs one simulation.
///
/// `progress`, if given, is called as `progress(sim_time, duration, flows_started,
/// flows_finished, events)` now and then; if it returns `False` the run stops. `threads` > 1
/// runs the network's parts on that many threads (the same results, bit for bit, on every
/// scheme). Returns a dict with `records` (an [`ArrowBatch`]), `counters`,
/// `summary` and `config` (JSON texts).
#[pyfunction]
#[pyo3(signature = (config_json, progress=None, threads=1))]
fn simulate<'py>(
    py: Python<'py>,
    config_json: &str,
    progress: Option<PyObject>,
    threads: u32,
) -> PyResult<Bound<'py, PyDict>> {
    let cfg = Config::from_json(config_json).map_err(config_err)?;
    let mut callback_error: Option<PyErr> = None;
    let result = py.allow_threads(|| {
        let mut cb = |p: &Progress| -> bool {
            Python::with_gil(|py| {
                if let Err(e) = py.check_signals() {
                    callback_error = Some(e);
                    return false;
                }
                if let Some(f) = &progress {
                    match f.call1(
                        py,
                        (
                            p.sim_time,
                            p.duration,
                            p.flows_started,
                            p.flows_finished,
                            p.events,
                        ),
                    ) {
                        Ok(v) => !matches!(v.extract::<bool>(py), Ok(false)),
                        Err(e) => {
                            callback_error = Some(e);
                            false
                        }
                    }
                } else {
                    true
                }
            })
        };
        repflow_sim::run_threaded(&cfg, threads, &mut cb)
    });
    if let Some(e) = callback_error {
        return Err(e);
    }
    let out = match result {
        Ok(o) => o,
        Err(SimError::Config(e)) => return Err(config_err(e)),
        Err(SimError::Cancelled) => {
            return Err(PyKeyboardInterrupt::new_err("simulation cancelled"))
        }
        Err(e) => return Err(PyValueError::new_err(e.to_string())),
    };
    let d = PyDict::new(py);
    d.set_item("records", ArrowBatch::from_records(&out.records))?;
    d.set_item(
        "counters",
        serde_json::to_string(&out.counters).map_err(config_err)?,
    )?;
    d.set_item(
        "summary",
        serde_json::to_string(&out.summary).map_err(config_err)?,
    )?;
    d.set_item(
        "config",
        serde_json::to_string(&out.config).map_err(config_err)?,
    )?;
    Ok(d)
}

/// SmartRep's RepNumAssign table from the simulator (`repflow_sim::smartrep`): the history
/// is `sizes` (observed flow sizes, bytes) or else the CDF `cdf_text`. Returns a dict with
/// `unit_bytes`, `extra` (replicas per size bin), `weights` (bin weights), `total_bytes` (Θ
/// with the same weighting) and `overhead` (replica bytes / Θ, at most `eps`).
#[pyfunction]
#[pyo3(signature = (eps=0.03, p=0.1, max_extra=4, threshold=100_000, unit_bytes=1000, cdf_text=None, sizes=None))]
#[allow(clippy::too_many_arguments)]
fn sim_smartrep_table<'py>(
    py: Python<'py>,
    eps: f64,
    p: f64,
    max_extra: u32,
    threshold: u64,
    unit_bytes: u64,
    cdf_text: Option<&str>,
    sizes: Option<Vec<u64>>,
) -> PyResult<Bound<'py, PyDict>> {
    use repflow_sim::scheme::SizeHistogram;
    if !(eps > 0.0 && eps < 1.0) {
        return Err(config_err(format!("eps: must be in (0, 1), got {eps}")));
    }
    if !(p > 0.0 && p < 1.0) {
        return Err(config_err(format!("p: must be in (0, 1), got {p}")));
    }
    if unit_bytes == 0 || threshold == 0 {
        return Err(config_err("unit_bytes and threshold: must be positive"));
    }
    let h = match (sizes, cdf_text) {
        (Some(s), _) => SizeHistogram::from_sizes(&s, unit_bytes, threshold),
        (None, Some(t)) => {
            let cdf = Cdf::parse(t).map_err(config_err)?;
            SizeHistogram::from_cdf(&cdf, unit_bytes, threshold)
        }
        (None, None) => return Err(config_err("give sizes or cdf_text")),
    };
    let t = h.table(eps, p, max_extra);
    let d = PyDict::new(py);
    d.set_item("unit_bytes", t.unit_bytes)?;
    d.set_item("overhead", h.overhead(&t))?;
    d.set_item("extra", PyList::new(py, &t.extra)?)?;
    d.set_item("weights", PyList::new(py, &h.counts)?)?;
    d.set_item("total_bytes", h.total_bytes)?;
    Ok(d)
}

/// Pairwise link-disjoint equal-cost paths between hosts under different ToRs (SmartRep's
/// ecpNum) in the topology of a configuration.
#[pyfunction]
fn sim_disjoint_paths(config_json: &str) -> PyResult<u32> {
    let cfg = Config::from_json(config_json).map_err(config_err)?;
    let topo = repflow_sim::network::Topology::build(&cfg.topology, cfg.routing.hash, cfg.seed);
    Ok(repflow_sim::hca::max_disjoint_paths(&topo))
}

/// RepFlow hash collisions in the topology of a configuration: `samples` flows between host
/// pairs drawn as `workload.pairs` says, each with a random ephemeral source port; copy 1
/// goes to destination port 5001. Returns `(flows, inter_tor, collisions)`.
#[pyfunction]
fn sim_collisions(config_json: &str, samples: u64) -> PyResult<(u64, u64, u64)> {
    use repflow_sim::config::PairPattern;
    use repflow_sim::engine::Rng;
    let cfg = Config::from_json(config_json).map_err(config_err)?;
    let topo = repflow_sim::network::Topology::build(&cfg.topology, cfg.routing.hash, cfg.seed);
    let mut rng = Rng::new(cfg.seed, 77);
    let n = topo.n_hosts as u64;
    let inter = cfg.workload.pairs == PairPattern::InterPod;
    let mut pairs = Vec::with_capacity(samples as usize);
    let mut sports = Vec::with_capacity(samples as usize);
    while (pairs.len() as u64) < samples {
        let (s, d) = (rng.below(n) as u32, rng.below(n) as u32);
        if s == d || (inter && topo.host_group[s as usize] == topo.host_group[d as usize]) {
            continue;
        }
        pairs.push((s, d));
        sports.push(repflow_sim::replication::ephemeral_port(&mut rng));
    }
    let c = repflow_sim::hca::repflow_collisions(
        &topo,
        &pairs,
        &sports,
        repflow_sim::replication::BASE_PORT,
    );
    Ok((c.flows, c.inter_tor, c.collisions))
}

/// The text of a quantity given as a string (`"50ms"`); a Python number is read as its text, so
/// `10` is refused like `"10"` (a bare number has no unit). Booleans are refused.
fn quantity_text(value: &Bound<'_, PyAny>, what: &str) -> PyResult<String> {
    if value.is_instance_of::<PyBool>() {
        return Err(PyValueError::new_err(format!("{value} is not {what}")));
    }
    if let Ok(s) = value.downcast::<PyString>() {
        return Ok(s.to_cow()?.into_owned());
    }
    match value.extract::<f64>() {
        Ok(_) => Ok(value.str()?.to_cow()?.into_owned()),
        Err(_) => Err(PyValueError::new_err(format!(
            "{} is not {what} (give a string with a unit, such as \"50ms\")",
            value.repr()?
        ))),
    }
}

/// Seconds in a duration: `"50ms"`, `"2us"`, `"2min"` (the grammar of `repflow_sim::units`; a
/// bare number is refused). Raises `ValueError` naming the value and the accepted forms.
#[pyfunction]
fn parse_duration(value: &Bound<'_, PyAny>) -> PyResult<f64> {
    let text = quantity_text(value, "a duration")?;
    Ok(Duration::parse(&text)
        .map_err(PyValueError::new_err)?
        .secs())
}

/// Bits per second in a rate: `"10Gbps"`, `"10Gb/s"`, `"50Mbit"`, `"1G"` (not a bare number).
/// Raises `ValueError` naming the value and the accepted forms.
#[pyfunction]
fn parse_rate(value: &Bound<'_, PyAny>) -> PyResult<u64> {
    let text = quantity_text(value, "a rate")?;
    Ok(Rate::parse(&text).map_err(PyValueError::new_err)?.bps())
}

/// Bytes in a size: `"100KB"` (powers of 1000), `"64KiB"` (powers of 1024), not a bare number.
/// Raises `ValueError` naming the value and the accepted forms.
#[pyfunction]
fn parse_bytes(value: &Bound<'_, PyAny>) -> PyResult<u64> {
    let text = quantity_text(value, "a size")?;
    Ok(Bytes::parse(&text).map_err(PyValueError::new_err)?.0)
}

/// The Rust core's version.
#[pyfunction]
fn core_version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

/// The `repflow._core` module.
#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("ConfigError", m.py().get_type::<ConfigError>())?;
    m.add_function(wrap_pyfunction!(validate_config, m)?)?;
    m.add_function(wrap_pyfunction!(default_config, m)?)?;
    m.add_function(wrap_pyfunction!(scheme_defaults, m)?)?;
    m.add_function(wrap_pyfunction!(builtin_workloads, m)?)?;
    m.add_function(wrap_pyfunction!(workload_text, m)?)?;
    m.add_function(wrap_pyfunction!(parse_cdf, m)?)?;
    m.add_function(wrap_pyfunction!(simulate, m)?)?;
    m.add_function(wrap_pyfunction!(core_version, m)?)?;
    m.add_function(wrap_pyfunction!(parse_duration, m)?)?;
    m.add_function(wrap_pyfunction!(parse_rate, m)?)?;
    m.add_function(wrap_pyfunction!(parse_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(record_schema, m)?)?;
    m.add_function(wrap_pyfunction!(write_parquet, m)?)?;
    m.add_function(wrap_pyfunction!(sample_sizes, m)?)?;
    m.add_function(wrap_pyfunction!(host_schedule, m)?)?;
    m.add_function(wrap_pyfunction!(summarize, m)?)?;
    m.add_function(wrap_pyfunction!(bin_stats, m)?)?;
    m.add_class::<ArrowBatch>()?;
    m.add_function(wrap_pyfunction!(sim_smartrep_table, m)?)?;
    m.add_function(wrap_pyfunction!(sim_disjoint_paths, m)?)?;
    m.add_function(wrap_pyfunction!(sim_collisions, m)?)?;
    net::register(m)?;
    proxy::register(m)?;
    Ok(())
}

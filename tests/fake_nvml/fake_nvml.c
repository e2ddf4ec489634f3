/* A fake libnvidia-ml.so.1 for sysprof's tests: no GPU needed.
 *
 * Build: cc -shared -fPIC -O1 -o libnvidia-ml.so.1 fake_nvml.c   (-DFAKE_NVML_MINIMAL: a library
 * without the optional symbols). Select it with SYSPROF_NVML_LIBRARY (native) or by loading it into
 * pynvml. The ABI subset is declared below from NVIDIA's public documentation (NVML API reference,
 * pynvml.py of nvidia-ml-py), independently of csrc/gpu/nvml_abi.hpp, so that a layout slip on one side
 * shows up as wrong values instead of being mirrored.
 *
 * Behaviour, read from the environment at every nvmlInit:
 *   FAKE_NVML_INIT_ERROR=<code>  nvmlInit returns that nvmlReturn_t
 *   FAKE_NVML_DEVICES=<n>        device count (default 2, at most 4)
 *   FAKE_NVML_LOST_AFTER=<n>     device 1 answers GPU_IS_LOST to every call after its n-th
 *   FAKE_NVML_HANG_AT=<n>        the n-th call of FAKE_NVML_HANG_CALL on device 0 blocks ...; -1: every
 *                                call of it, on every device
 *   FAKE_NVML_HANG_MS=<ms>       ... for this long (default 3000)
 *   FAKE_NVML_HANG_CALL=<name>   the function that hangs (default nvmlDeviceGetUtilizationRates); also
 *                                nvmlInit_v2, nvmlDeviceGetCount_v2, nvmlDeviceGetHandleByIndex_v2 (device =
 *                                the index asked for); "*": every call that concerns a device
 *   FAKE_NVML_STATIC=1           levels do not depend on call counts (to compare two readers)
 *   FAKE_NVML_REFUSE=<list>      "name[@d]=code,..." : the function `name` (its NVML name, "gpm:<metric
 *                                id>" for one GPM metric, "field:<id>" for one field value) answers nvmlReturn_t `code` on device d (every
 *                                device without @d), e.g. nvmlDeviceGetRemappedRows@1=3 (NOT_SUPPORTED),
 *                                nvmlDeviceGetCurrentClocksEventReasons=13 (FUNCTION_NOT_FOUND: an older driver)
 *   FAKE_NVML_GPM_DEVICES=<mask> the devices whose nvmlGpmQueryDeviceSupport says supported (default all)
 *   FAKE_NVML_MIG=<mask>         the devices in MIG mode (default none): 2 instances each, UUIDs
 *                                MIG-fa4e0000-0000-0000-0000-0000000000<d><i>
 *   FAKE_NVML_SAMPLES_BURST=<n>  nvmlDeviceGetSamples hands out n new samples at every call (see its section)
 *   FAKE_NVML_REASONS_DUTY=<on>/<period>  the clock event reasons of a device hold its bits (below) at its
 *                                calls n (of the reasons getter) with (n - 1) % period < on, else 0: a duty cycle
 *                                over the reader's calls (30/100 at 10 ms readings: 300 ms in each second)
 *
 * Values (d = device index; n = how many times this function was called on this device, this call
 * included, or 1 with FAKE_NVML_STATIC; t = CLOCK_MONOTONIC ns since the first nvmlInit):
 *   utilization gpu = (7n + 13d) % 101, memory = (3n + 5d) % 101
 *   memory total = (80 + 16d) GiB, reserved = 512 MiB, used = 1 GiB + d GiB + n MiB,
 *          free = total - reserved - used (v2), total - used (v1)
 *   nvmlDeviceGetPowerUsage = 100000 + 1000n + 500d mW; field POWER_INSTANT = 200000 + 1000n + 500d mW
 *   temperature (V and legacy) = 40 + n % 40 + d C; clocks SM = 1000 + n + 100d, MEM = 2000 + n + 100d MHz
 *   energy = 1e6 + P_d * t / 1e6 mJ with P_0 = 250 W, P_1 = 150 W
 *   PCIe tx = (1 + 2d) * t bytes, rx = (2 + 2d) * t bytes (i.e. 1e9 B/s per unit of the factor)
 *   NVLink tx = 25 GiB/s, rx = 50 GiB/s (as KiB counters) on device 0, summed over 18 links: scopeId
 *          UINT_MAX gives the sum, a link id 0..17 its 1/18 share
 * Throttling and health (section "throttling and health" below; t as above, in ns):
 *   clocks event reasons (both names) = 0x4 (SW power cap) on device 0, 0x48 (HW slowdown | HW thermal) on 1
 *          (FAKE_NVML_REASONS_DUTY: only at some calls)
 *   nvmlDeviceGetPcieThroughput (KB/s) TX = 300000 + 1000d, RX = 600000 + 1000d (device 1 too: it answers
 *          whether or not the PCIe count fields are refused)
 *   violation time POWER = t / (4 >> d) ns (a quarter of the time on device 0, half on 1), THERMAL = t / 8 on
 *          device 0, 0 on 1; referenceTime = CLOCK_REALTIME us
 *   ECC volatile corrected = 5 + d, uncorrected = d (aggregate: 1000 + those, to catch the wrong counter)
 *   remapped rows correctable = 2 + d, uncorrectable = d, pending = d, failure = 0
 *   PCIe replays = 7 + 3d; enforced power limit = 700000 - 100000d mW; PCIe link generation = 5 - d,
 *          width = 16 >> d
 * GPM (section "GPM" below): nvmlGpmSampleGet stamps the sample with k = its call count on the device;
 *   nvmlGpmMetricsGet(s1, s2) gives, for a percentage metric id m (1..13), m + 10d + k2 % 10 (k2: s2's k, 1
 *   with FAKE_NVML_STATIC), and for a bandwidth id (20, 21, 60, 61) 10m + d MiB/s, but NOT_SUPPORTED for the
 *   NVLink ones (60, 61) on device 1 (no NVLink, as its fields say); s1 = s2, samples of two devices, or s2
 *   taken before s1: INVALID_ARGUMENT; version != 1:
 *   ARGUMENT_VERSION_MISMATCH. fake_nvml_gpm_live() counts allocated samples.
 * Device 1 answers NOT_SUPPORTED for the POWER_INSTANT, TOTAL_ENERGY_CONSUMPTION and NVLink fields
 * (the call itself succeeds), and reports PCIe counters as unsigned long.
 *
 * Introspection for the tests (ctypes): fake_nvml_calls(name, device) counts calls of a function
 * ("field:<id>" counts requests of a field id; device -1: nvmlInit_v2, nvmlInitWithFlags,
 * nvmlShutdown), fake_nvml_all_calls() counts the calls of every function (each at its entry, before
 * any hang), fake_nvml_refcount(), fake_nvml_unsafe_shutdowns() (the last nvmlShutdown while another
 * call was in flight), fake_nvml_uninitialized_calls() (device calls after the last nvmlShutdown),
 * fake_nvml_hanging() (calls blocked in a hang now) and fake_nvml_hang_begin_ns() / _end_ns()
 * (CLOCK_REALTIME of the latest hang's start and end; -1 before there is one).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- ABI subset ---- */
typedef int nvmlReturn_t;
enum {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25
};
enum { VT_DOUBLE = 0, VT_UINT = 1, VT_ULONG = 2, VT_ULL = 3 };
enum { CLOCK_GRAPHICS = 0, CLOCK_SM = 1, CLOCK_MEM = 2 };
enum {
  FI_TOTAL_ENERGY = 83,
  FI_NVLINK_DATA_TX = 138,
  FI_NVLINK_DATA_RX = 139,
  FI_POWER_INSTANT = 186,
  FI_PCIE_TX = 197,
  FI_PCIE_RX = 198
};

typedef struct fake_device *nvmlDevice_t;
typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct { unsigned int version; unsigned long long total, reserved, free, used; } nvmlMemory_v2_t;
typedef struct { unsigned int version; int sensorType; int temperature; } nvmlTemperature_v1_t;
typedef union {
  double dVal;
  int siVal;
  unsigned int uiVal;
  unsigned long ulVal;
  unsigned long long ullVal;
  long long sllVal;
  unsigned short usVal;
} nvmlValue_t;
typedef struct {
  unsigned int fieldId, scopeId;
  long long timestamp, latencyUsec;
  int valueType;
  nvmlReturn_t nvmlReturn;
  nvmlValue_t value;
} nvmlFieldValue_t;
typedef struct {
  char busIdLegacy[16];
  unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
} nvmlPciInfo_t;

_Static_assert(sizeof(nvmlFieldValue_t) == 40 && offsetof(nvmlFieldValue_t, value) == 32, "field value");
_Static_assert(sizeof(nvmlMemory_v2_t) == 40, "memory v2");
_Static_assert(sizeof(nvmlPciInfo_t) == 68, "pci info");
#define MEMORY_V2_VERSION 0x02000028u /* pynvml.py nvmlMemory_v2 */
#define TEMPERATURE_V1_VERSION 0x0100000Cu /* pynvml.py nvmlTemperature_v1 */

#define EXPORT __attribute__((visibility("default")))
#define MAX_DEVICES 4
#define GiB (1024ull * 1024 * 1024)
#define MiB (1024ull * 1024)

/* ---- state ---- */
struct fake_device { int index; };
static struct fake_device devices[MAX_DEVICES] = {{0}, {1}, {2}, {3}};

static int cfg_init_error, cfg_devices = 2, cfg_static;
static long cfg_lost_after, cfg_hang_at, cfg_hang_ms = 3000;
static char cfg_hang_call[48] = "nvmlDeviceGetUtilizationRates";
static long long t0_ns = -1, hang_begin_ns = -1, hang_end_ns = -1;
static int hanging;
static int refcount, inflight, unsafe_shutdowns, uninitialized_calls;
static long device_calls[MAX_DEVICES];

/* Call counters: (name, device) -> count. */
#define MAX_COUNTERS 128
static struct { char name[48]; int device; long count; } counters[MAX_COUNTERS];
static int ncounters;
static long all_calls;
static long bump(const char *name, int device) {
  if (strncmp(name, "field:", 6) != 0) __atomic_add_fetch(&all_calls, 1, __ATOMIC_SEQ_CST);
  for (int i = 0; i < __atomic_load_n(&ncounters, __ATOMIC_ACQUIRE); ++i)
    if (counters[i].device == device && strcmp(counters[i].name, name) == 0)
      return __atomic_add_fetch(&counters[i].count, 1, __ATOMIC_SEQ_CST);
  /* Rare: a new name. Serialised by a spin lock; lookups above only read published entries. */
  static int lock;
  while (__atomic_exchange_n(&lock, 1, __ATOMIC_ACQUIRE)) {}
  long r = 0;
  for (int i = 0; i < ncounters; ++i)
    if (counters[i].device == device && strcmp(counters[i].name, name) == 0) r = ++counters[i].count;
  if (!r && ncounters < MAX_COUNTERS) {
    snprintf(counters[ncounters].name, sizeof counters[ncounters].name, "%s", name);
    counters[ncounters].device = device;
    counters[ncounters].count = r = 1;
    __atomic_store_n(&ncounters, ncounters + 1, __ATOMIC_RELEASE);
  }
  __atomic_store_n(&lock, 0, __ATOMIC_RELEASE);
  return r;
}

EXPORT long fake_nvml_calls(const char *name, int device) {
  for (int i = 0; i < __atomic_load_n(&ncounters, __ATOMIC_ACQUIRE); ++i)
    if (counters[i].device == device && strcmp(counters[i].name, name) == 0)
      return __atomic_load_n(&counters[i].count, __ATOMIC_SEQ_CST);
  return 0;
}
EXPORT long fake_nvml_all_calls(void) { return __atomic_load_n(&all_calls, __ATOMIC_SEQ_CST); }
EXPORT int fake_nvml_refcount(void) { return __atomic_load_n(&refcount, __ATOMIC_SEQ_CST); }
EXPORT int fake_nvml_unsafe_shutdowns(void) { return __atomic_load_n(&unsafe_shutdowns, __ATOMIC_SEQ_CST); }
EXPORT int fake_nvml_uninitialized_calls(void) { return __atomic_load_n(&uninitialized_calls, __ATOMIC_SEQ_CST); }
EXPORT int fake_nvml_hanging(void) { return __atomic_load_n(&hanging, __ATOMIC_SEQ_CST); }
EXPORT long long fake_nvml_hang_begin_ns(void) { return __atomic_load_n(&hang_begin_ns, __ATOMIC_SEQ_CST); }
EXPORT long long fake_nvml_hang_end_ns(void) { return __atomic_load_n(&hang_end_ns, __ATOMIC_SEQ_CST); }

static long long mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}
static long env_long(const char *name, long dflt) {
  const char *v = getenv(name);
  return v && *v ? strtol(v, NULL, 10) : dflt;
}
static long long wall_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (long long)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* Blocks for FAKE_NVML_HANG_MS if this call (the n-th of `name` on `device`) is the one configured. */
static void maybe_hang(const char *name, int device, long n) {
  if (cfg_hang_at == 0) return;
  if (strcmp(cfg_hang_call, name) != 0 && !(cfg_hang_call[0] == '*' && device >= 0)) return;
  if (cfg_hang_at > 0 && !(device == 0 && n == cfg_hang_at)) return;
  __atomic_add_fetch(&hanging, 1, __ATOMIC_SEQ_CST);
  __atomic_store_n(&hang_begin_ns, wall_ns(), __ATOMIC_SEQ_CST);
  struct timespec ts = {cfg_hang_ms / 1000, (cfg_hang_ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {}
  __atomic_store_n(&hang_end_ns, wall_ns(), __ATOMIC_SEQ_CST);
  __atomic_sub_fetch(&hanging, 1, __ATOMIC_SEQ_CST);
}

/* Entry to every device call: counts it, tracks calls in flight, applies loss. n: this call's number. */
static nvmlReturn_t enter(const char *name, nvmlDevice_t dev, long *n) {
  __atomic_add_fetch(&inflight, 1, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(&refcount, __ATOMIC_SEQ_CST) <= 0) {
    __atomic_add_fetch(&uninitialized_calls, 1, __ATOMIC_SEQ_CST);
    return NVML_ERROR_UNINITIALIZED;
  }
  if (!dev || dev < devices || dev >= devices + cfg_devices) return NVML_ERROR_INVALID_ARGUMENT;
  long c = bump(name, dev->index);
  *n = cfg_static ? 1 : c;
  maybe_hang(name, dev->index, c);
  long all = __atomic_add_fetch(&device_calls[dev->index], 1, __ATOMIC_SEQ_CST);
  if (dev->index == 1 && cfg_lost_after > 0 && all > cfg_lost_after) return NVML_ERROR_GPU_IS_LOST;
  return NVML_SUCCESS;
}
static nvmlReturn_t leave(nvmlReturn_t r) {
  __atomic_sub_fetch(&inflight, 1, __ATOMIC_SEQ_CST);
  return r;
}
#define ENTER(name, dev)                  \
  long n = 0;                             \
  nvmlReturn_t r_ = enter(name, dev, &n); \
  if (r_ != NVML_SUCCESS) return leave(r_); \
  const int d = (dev)->index;             \
  (void)n;                                \
  (void)d

static unsigned long long elapsed_ns(void) {
  long long t = mono_ns() - t0_ns;
  return t > 0 ? (unsigned long long)t : 0;
}
__attribute__((unused)) static unsigned long long energy_mj(int d) { return 1000000ull + (d == 0 ? 250ull : 150ull) * elapsed_ns() / 1000000ull; }

/* ---- init / shutdown ---- */
static void read_issue13_config(void);
static nvmlReturn_t refused(const char *name, int d);
static nvmlReturn_t do_init(const char *name) {
  long calls = bump(name, -1);
  cfg_init_error = (int)env_long("FAKE_NVML_INIT_ERROR", 0);
  cfg_devices = (int)env_long("FAKE_NVML_DEVICES", 2);
  if (cfg_devices < 0) cfg_devices = 0;
  if (cfg_devices > MAX_DEVICES) cfg_devices = MAX_DEVICES;
  cfg_lost_after = env_long("FAKE_NVML_LOST_AFTER", 0);
  cfg_hang_at = env_long("FAKE_NVML_HANG_AT", 0);
  cfg_hang_ms = env_long("FAKE_NVML_HANG_MS", 3000);
  cfg_static = (int)env_long("FAKE_NVML_STATIC", 0);
  const char *call = getenv("FAKE_NVML_HANG_CALL");
  snprintf(cfg_hang_call, sizeof cfg_hang_call, "%s", call && *call ? call : "nvmlDeviceGetUtilizationRates");
  read_issue13_config();
  maybe_hang(name, -1, calls);
  if (cfg_init_error) return cfg_init_error;
  if (t0_ns < 0) t0_ns = mono_ns();
  __atomic_add_fetch(&refcount, 1, __ATOMIC_SEQ_CST);
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlInit_v2(void) { return do_init("nvmlInit_v2"); }
EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
  (void)flags;
  return do_init("nvmlInitWithFlags");
}
EXPORT nvmlReturn_t nvmlShutdown(void) {
  bump("nvmlShutdown", -1);
  /* Unsafe: the last shutdown (the library really closes) while a call is in flight. An earlier one only drops
   * a reference, as NVML's own reference count does, while another client's XID wait may be in flight. */
  if (__atomic_load_n(&inflight, __ATOMIC_SEQ_CST) > 0 && __atomic_load_n(&refcount, __ATOMIC_SEQ_CST) == 1)
    __atomic_add_fetch(&unsafe_shutdowns, 1, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(&refcount, __ATOMIC_SEQ_CST) <= 0) return NVML_ERROR_UNINITIALIZED;
  __atomic_sub_fetch(&refcount, 1, __ATOMIC_SEQ_CST);
  return NVML_SUCCESS;
}
EXPORT const char *nvmlErrorString(nvmlReturn_t r) {
  switch (r) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    default: return "Fake NVML error";
  }
}
EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
  maybe_hang("nvmlDeviceGetCount_v2", -1, bump("nvmlDeviceGetCount_v2", -1));
  if (refcount <= 0) return NVML_ERROR_UNINITIALIZED;
  *count = (unsigned)cfg_devices;
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *dev) {
  if (index < MAX_DEVICES)
    maybe_hang("nvmlDeviceGetHandleByIndex_v2", (int)index, bump("nvmlDeviceGetHandleByIndex_v2", (int)index));
  if (refcount <= 0) return NVML_ERROR_UNINITIALIZED;
  if (index >= (unsigned)cfg_devices) return NVML_ERROR_INVALID_ARGUMENT;
  *dev = &devices[index];
  return NVML_SUCCESS;
}

/* ---- device queries ---- */
static nvmlReturn_t put_string(char *buf, unsigned int len, const char *s) {
  if (strlen(s) + 1 > len) return NVML_ERROR_INSUFFICIENT_SIZE;
  memcpy(buf, s, strlen(s) + 1);
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t dev, char *name, unsigned int len) {
  ENTER("nvmlDeviceGetName", dev);
  char s[64];
  snprintf(s, sizeof s, "Fake GPU %d", d);
  return leave(put_string(name, len, s));
}
static nvmlReturn_t mig_uuid(nvmlDevice_t dev, char *uuid, unsigned int len);
EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t dev, char *uuid, unsigned int len) {
  if (mig_uuid(dev, uuid, len) != NVML_ERROR_NOT_FOUND) return mig_uuid(dev, uuid, len); /* a MIG handle */
  ENTER("nvmlDeviceGetUUID", dev);
  char s[64];
  snprintf(s, sizeof s, "GPU-fa4e0000-0000-0000-0000-00000000000%d", d);
  return leave(put_string(uuid, len, s));
}
EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t dev, nvmlPciInfo_t *pci) {
  ENTER("nvmlDeviceGetPciInfo_v3", dev);
  memset(pci, 0, sizeof *pci);
  pci->bus = (unsigned)(0x17 + d);
  snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "0000:%02X:00.0", pci->bus);
  snprintf(pci->busId, sizeof pci->busId, "00000000:%02X:00.0", pci->bus);
  pci->pciDeviceId = 0x233510deu;
  return leave(NVML_SUCCESS);
}
EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t dev, nvmlUtilization_t *u) {
  ENTER("nvmlDeviceGetUtilizationRates", dev);
  u->gpu = (unsigned)((7 * n + 13 * d) % 101);
  u->memory = (unsigned)((3 * n + 5 * d) % 101);
  return leave(NVML_SUCCESS);
}
static void memory_values(int d, long n, unsigned long long *total, unsigned long long *reserved,
                          unsigned long long *used) {
  *total = (80ull + 16ull * (unsigned)d) * GiB;
  *reserved = 512 * MiB;
  *used = GiB + (unsigned)d * GiB + (unsigned long long)n * MiB;
}
EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t dev, nvmlMemory_t *m) {
  ENTER("nvmlDeviceGetMemoryInfo", dev);
  unsigned long long reserved;
  memory_values(d, n, &m->total, &reserved, &m->used);
  m->free = m->total - m->used;
  return leave(NVML_SUCCESS);
}
EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t dev, unsigned int *mw) {
  ENTER("nvmlDeviceGetPowerUsage", dev);
  *mw = (unsigned)(100000 + 1000 * n + 500 * d);
  return leave(NVML_SUCCESS);
}
EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t dev, int sensor, unsigned int *t) {
  ENTER("nvmlDeviceGetTemperature", dev);
  if (sensor != 0) return leave(NVML_ERROR_INVALID_ARGUMENT);
  *t = (unsigned)(40 + n % 40 + d);
  return leave(NVML_SUCCESS);
}
EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t dev, int type, unsigned int *mhz) {
  if (type == CLOCK_SM) {
    ENTER("nvmlDeviceGetClockInfo:SM", dev);
    *mhz = (unsigned)(1000 + n + 100 * d);
    return leave(NVML_SUCCESS);
  }
  if (type == CLOCK_MEM) {
    ENTER("nvmlDeviceGetClockInfo:MEM", dev);
    *mhz = (unsigned)(2000 + n + 100 * d);
    return leave(NVML_SUCCESS);
  }
  return NVML_ERROR_NOT_SUPPORTED;
}

#ifndef FAKE_NVML_MINIMAL
EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t dev, nvmlMemory_v2_t *m) {
  ENTER("nvmlDeviceGetMemoryInfo_v2", dev);
  if (m->version != MEMORY_V2_VERSION) return leave(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
  memory_values(d, n, &m->total, &m->reserved, &m->used);
  m->free = m->total - m->reserved - m->used;
  return leave(NVML_SUCCESS);
}
EXPORT nvmlReturn_t nvmlDeviceGetTemperatureV(nvmlDevice_t dev, nvmlTemperature_v1_t *t) {
  ENTER("nvmlDeviceGetTemperatureV", dev);
  if (t->version != TEMPERATURE_V1_VERSION) return leave(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
  if (t->sensorType != 0) return leave(NVML_ERROR_INVALID_ARGUMENT);
  t->temperature = (int)(40 + n % 40 + d);
  return leave(NVML_SUCCESS);
}
EXPORT nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t dev, unsigned long long *mj) {
  ENTER("nvmlDeviceGetTotalEnergyConsumption", dev);
  *mj = energy_mj(d);
  return leave(NVML_SUCCESS);
}
EXPORT nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t dev, int count, nvmlFieldValue_t *values) {
  ENTER("nvmlDeviceGetFieldValues", dev);
  long long now_us = mono_ns() / 1000;
  unsigned long long t = elapsed_ns();
  for (int i = 0; i < count; ++i) {
    nvmlFieldValue_t *f = &values[i];
    char name[32];
    snprintf(name, sizeof name, "field:%u", f->fieldId);
    long k = bump(name, d);
    if (cfg_static) k = 1;
    f->timestamp = now_us;
    f->latencyUsec = 0;
    f->nvmlReturn = NVML_SUCCESS;
    switch (f->fieldId) {
      case FI_POWER_INSTANT:
        if (d == 1) { f->nvmlReturn = NVML_ERROR_NOT_SUPPORTED; break; }
        f->valueType = VT_UINT;
        f->value.uiVal = (unsigned)(200000 + 1000 * k + 500 * d);
        break;
      case FI_TOTAL_ENERGY:
        if (d == 1) { f->nvmlReturn = NVML_ERROR_NOT_SUPPORTED; break; }
        f->valueType = VT_ULL;
        f->value.ullVal = energy_mj(d);
        break;
      case FI_PCIE_TX:
      case FI_PCIE_RX: {
        unsigned long long bytes = (f->fieldId == FI_PCIE_TX ? 1ull : 2ull) * t + 2ull * (unsigned)d * t;
        if (d == 1) {
          f->valueType = VT_ULONG;
          f->value.ulVal = (unsigned long)bytes;
        } else {
          f->valueType = VT_ULL;
          f->value.ullVal = bytes;
        }
        break;
      }
      case FI_NVLINK_DATA_TX:
      case FI_NVLINK_DATA_RX: {
        if (d != 0) { f->nvmlReturn = NVML_ERROR_NOT_SUPPORTED; break; }
        /* KiB: 25 GiB/s = 25 * 1024 * 1024 KiB/s, rx twice that; 18 links. */
        unsigned long long kib = (f->fieldId == FI_NVLINK_DATA_TX ? 25ull : 50ull) * 1024ull * 1024ull * t / 1000000000ull;
        f->valueType = VT_ULL;
        if (f->scopeId == 0xFFFFFFFFu) f->value.ullVal = kib;
        else if (f->scopeId < 18) f->value.ullVal = kib / 18;
        else f->nvmlReturn = NVML_ERROR_INVALID_ARGUMENT;
        break;
      }
      default:
        f->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
    }
    if (refused(name, d) != NVML_SUCCESS) f->nvmlReturn = refused(name, d); /* FAKE_NVML_REFUSE=field:<id> */
  }
  return leave(NVML_SUCCESS);
}
#endif

/* ==== issue 13: configured refusals (FAKE_NVML_REFUSE, FAKE_NVML_GPM_DEVICES) ==== */
#define MAX_REFUSALS 16
static struct { char name[48]; int device; nvmlReturn_t code; } refusals[MAX_REFUSALS];
static int nrefusals;
static long cfg_gpm_devices = -1, cfg_mig, cfg_samples_burst, cfg_duty_on, cfg_duty_period;

static void read_issue13_config(void) {
  nrefusals = 0;
  cfg_gpm_devices = env_long("FAKE_NVML_GPM_DEVICES", -1);
  cfg_mig = env_long("FAKE_NVML_MIG", 0);
  cfg_samples_burst = env_long("FAKE_NVML_SAMPLES_BURST", 0);
  const char *duty = getenv("FAKE_NVML_REASONS_DUTY");
  cfg_duty_on = cfg_duty_period = 0;
  if (duty && sscanf(duty, "%ld/%ld", &cfg_duty_on, &cfg_duty_period) != 2) cfg_duty_period = 0;
  const char *v = getenv("FAKE_NVML_REFUSE");
  char buf[512];
  snprintf(buf, sizeof buf, "%s", v ? v : "");
  for (char *save = NULL, *item = strtok_r(buf, ",", &save); item && nrefusals < MAX_REFUSALS;
       item = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(item, '=');
    if (!eq) continue;
    *eq = 0;
    char *at = strchr(item, '@');
    refusals[nrefusals].device = at ? atoi(at + 1) : -1;
    if (at) *at = 0;
    snprintf(refusals[nrefusals].name, sizeof refusals[nrefusals].name, "%s", item);
    refusals[nrefusals].code = atoi(eq + 1);
    ++nrefusals;
  }
}
/* The configured answer of `name` on device d, or NVML_SUCCESS. */
__attribute__((unused)) static nvmlReturn_t refused(const char *name, int d) {
  for (int i = 0; i < nrefusals; ++i)
    if ((refusals[i].device < 0 || refusals[i].device == d) && strcmp(refusals[i].name, name) == 0)
      return refusals[i].code;
  return NVML_SUCCESS;
}
/* ==== issue 13: MIG (full and minimal builds: nvmlDeviceGetUUID answers for MIG handles) ==== */
static struct fake_device mig_devices[MAX_DEVICES][2];
static nvmlReturn_t mig_uuid(nvmlDevice_t dev, char *uuid, unsigned int len) {
  if (!dev || (void *)dev < (void *)mig_devices || (void *)dev >= (void *)(mig_devices + MAX_DEVICES))
    return NVML_ERROR_NOT_FOUND;
  int k = (int)(dev - &mig_devices[0][0]);
  char s[64];
  snprintf(s, sizeof s, "MIG-fa4e0000-0000-0000-0000-0000000000%d%d", k / 2, k % 2);
  return put_string(uuid, len, s);
}

#define ENTER_OR_REFUSE(name, dev) \
  ENTER(name, dev);                \
  if (refused(name, d) != NVML_SUCCESS) return leave(refused(name, d))

#ifndef FAKE_NVML_MINIMAL
/* ==== issue 13: throttling and health ==== */
typedef struct { unsigned long long referenceTime, violationTime; } nvmlViolationTime_t;
_Static_assert(sizeof(nvmlViolationTime_t) == 16, "violation time");
enum { PERF_POLICY_POWER = 0, PERF_POLICY_THERMAL = 1 };

/* The reasons at the n-th call of a reasons getter on device d (FAKE_NVML_REASONS_DUTY: a duty cycle over n). */
static unsigned long long reasons_of(int d, long n) {
  if (cfg_duty_period > 0 && (n - 1) % cfg_duty_period >= cfg_duty_on) return 0;
  return d == 0 ? 0x4ull : 0x48ull;
}
EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t dev, unsigned long long *reasons) {
  ENTER_OR_REFUSE("nvmlDeviceGetCurrentClocksEventReasons", dev);
  *reasons = reasons_of(d, n);
  return leave(NVML_SUCCESS);
}
EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t dev, unsigned long long *reasons) {
  ENTER_OR_REFUSE("nvmlDeviceGetCurrentClocksThrottleReasons", dev);
  *reasons = reasons_of(d, n);
  return leave(NVML_SUCCESS);
}
EXPORT nvmlReturn_t nvmlDeviceGetViolationStatus(nvmlDevice_t dev, int policy, nvmlViolationTime_t *v) {
  ENTER_OR_REFUSE("nvmlDeviceGetViolationStatus", dev);
  unsigned long long t = elapsed_ns();
  if (policy == PERF_POLICY_POWER) v->violationTime = t / (unsigned long long)(4 >> d);
  else if (policy == PERF_POLICY_THERMAL) v->violationTime = d == 0 ? t / 8 : 0;
  else return leave(NVML_ERROR_NOT_SUPPORTED);
  v->referenceTime = (unsigned long long)(wall_ns() / 1000);
  return leave(NVML_SUCCESS);
}
EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t dev, int type, int counter, unsigned long long *count) {
  ENTER_OR_REFUSE("nvmlDeviceGetTotalEccErrors", dev);
  if ((type != 0 && type != 1) || (counter != 0 && counter != 1)) return leave(NVML_ERROR_INVALID_ARGUMENT);
  *count = (type == 0 ? 5ull + (unsigned)d : (unsigned)d) + (counter == 1 ? 1000ull : 0ull);
  return leave(NVML_SUCCESS);
}
EXPORT nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t dev, unsigned int *corr, unsigned int *unc,
                                              unsigned int *pending, unsigned int *failure) {
  ENTER_OR_REFUSE("nvmlDeviceGetRemappedRows", dev);
  *corr = 2u + (unsigned)d, *unc = (unsigned)d, *pending = (unsigned)d, *failure = 0;
  return leave(NVML_SUCCESS);
}
EXPORT nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t dev, int counter, unsigned int *kbps) {
  ENTER_OR_REFUSE("nvmlDeviceGetPcieThroughput", dev);
  if (counter != 0 && counter != 1) return leave(NVML_ERROR_INVALID_ARGUMENT);
  *kbps = (counter == 0 ? 300000u : 600000u) + 1000u * (unsigned)d;
  return leave(NVML_SUCCESS);
}
EXPORT nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t dev, unsigned int *value) {
  ENTER_OR_REFUSE("nvmlDeviceGetPcieReplayCounter", dev);
  *value = 7u + 3u * (unsigned)d;
  return leave(NVML_SUCCESS);
}
EXPORT nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t dev, unsigned int *mw) {
  ENTER_OR_REFUSE("nvmlDeviceGetEnforcedPowerLimit", dev);
  *mw = 700000u - 100000u * (unsigned)d;
  return leave(NVML_SUCCESS);
}
EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t dev, unsigned int *gen) {
  ENTER_OR_REFUSE("nvmlDeviceGetCurrPcieLinkGeneration", dev);
  *gen = 5u - (unsigned)d;
  return leave(NVML_SUCCESS);
}
EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t dev, unsigned int *width) {
  ENTER_OR_REFUSE("nvmlDeviceGetCurrPcieLinkWidth", dev);
  *width = 16u >> d;
  return leave(NVML_SUCCESS);
}

/* ==== issue 13: MIG calls ==== */
EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t dev, unsigned int *current, unsigned int *pending) {
  ENTER_OR_REFUSE("nvmlDeviceGetMigMode", dev);
  *current = *pending = (unsigned)((cfg_mig >> d) & 1);
  return leave(NVML_SUCCESS);
}
EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t dev, unsigned int *count) {
  ENTER_OR_REFUSE("nvmlDeviceGetMaxMigDeviceCount", dev);
  *count = 7;
  return leave(NVML_SUCCESS);
}
EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t dev, unsigned int index, nvmlDevice_t *mig) {
  ENTER_OR_REFUSE("nvmlDeviceGetMigDeviceHandleByIndex", dev);
  if (!((cfg_mig >> d) & 1)) return leave(NVML_ERROR_INVALID_ARGUMENT);
  if (index >= 2) return leave(NVML_ERROR_NOT_FOUND);
  *mig = &mig_devices[d][index];
  return leave(NVML_SUCCESS);
}

/* ==== issue 13: GPM ==== */
typedef struct { unsigned int version, isSupportedDevice; } nvmlGpmSupport_t;
struct fake_gpm_sample { int used, device; long k, seq; long long t_ns; };
typedef struct fake_gpm_sample *nvmlGpmSample_t;
typedef struct {
  unsigned int metricId;
  nvmlReturn_t nvmlReturn;
  double value;
  struct { char *shortName, *longName, *unit; } metricInfo;
} nvmlGpmMetric_t;
#define FAKE_GPM_METRIC_MAX 477 /* pynvml.py NVML_GPM_METRIC_MAX */
typedef struct {
  unsigned int version, numMetrics;
  nvmlGpmSample_t sample1, sample2;
  nvmlGpmMetric_t metrics[FAKE_GPM_METRIC_MAX];
} nvmlGpmMetricsGet_t;
_Static_assert(sizeof(nvmlGpmMetric_t) == 40 && offsetof(nvmlGpmMetricsGet_t, metrics) == 24, "gpm metrics get");

#define MAX_GPM_SAMPLES 32
static struct fake_gpm_sample gpm_samples[MAX_GPM_SAMPLES];
static int gpm_live;
EXPORT int fake_nvml_gpm_live(void) { return __atomic_load_n(&gpm_live, __ATOMIC_SEQ_CST); }

EXPORT nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t dev, nvmlGpmSupport_t *s) {
  ENTER_OR_REFUSE("nvmlGpmQueryDeviceSupport", dev);
  if (s->version != 1) return leave(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
  s->isSupportedDevice = (unsigned)((cfg_gpm_devices >> d) & 1);
  return leave(NVML_SUCCESS);
}
EXPORT nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t *out) {
  bump("nvmlGpmSampleAlloc", -1);
  static int lock;
  while (__atomic_exchange_n(&lock, 1, __ATOMIC_ACQUIRE)) {}
  nvmlReturn_t r = NVML_ERROR_INSUFFICIENT_SIZE;
  for (int i = 0; i < MAX_GPM_SAMPLES; ++i)
    if (!gpm_samples[i].used) {
      memset(&gpm_samples[i], 0, sizeof gpm_samples[i]);
      gpm_samples[i].used = 1;
      gpm_samples[i].device = -1;
      *out = &gpm_samples[i];
      __atomic_add_fetch(&gpm_live, 1, __ATOMIC_SEQ_CST);
      r = NVML_SUCCESS;
      break;
    }
  __atomic_store_n(&lock, 0, __ATOMIC_RELEASE);
  return r;
}
EXPORT nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t s) {
  bump("nvmlGpmSampleFree", -1);
  if (!s || s < gpm_samples || s >= gpm_samples + MAX_GPM_SAMPLES || !s->used) return NVML_ERROR_INVALID_ARGUMENT;
  s->used = 0;
  __atomic_sub_fetch(&gpm_live, 1, __ATOMIC_SEQ_CST);
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t dev, nvmlGpmSample_t s) {
  ENTER_OR_REFUSE("nvmlGpmSampleGet", dev);
  if (!s || s < gpm_samples || s >= gpm_samples + MAX_GPM_SAMPLES || !s->used) return leave(NVML_ERROR_INVALID_ARGUMENT);
  static long seq;
  s->device = d, s->k = n, s->seq = __atomic_add_fetch(&seq, 1, __ATOMIC_SEQ_CST), s->t_ns = mono_ns();
  return leave(NVML_SUCCESS);
}
static int gpm_percent(unsigned id) { return id >= 1 && id <= 13; }
static int gpm_bandwidth(unsigned id) { return id == 20 || id == 21 || id == 60 || id == 61; }
EXPORT nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t *q) {
  if (!q) return NVML_ERROR_INVALID_ARGUMENT;
  if (q->version != 1) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  nvmlGpmSample_t a = q->sample1, b = q->sample2;
  if (!a || !b || a == b || a->device < 0 || a->device != b->device || b->seq <= a->seq || b->t_ns < a->t_ns)
    return NVML_ERROR_INVALID_ARGUMENT;
  if (q->numMetrics > FAKE_GPM_METRIC_MAX) return NVML_ERROR_INVALID_ARGUMENT;
  ENTER_OR_REFUSE("nvmlGpmMetricsGet", &devices[a->device]);
  for (unsigned i = 0; i < q->numMetrics; ++i) {
    nvmlGpmMetric_t *m = &q->metrics[i];
    char name[24];
    snprintf(name, sizeof name, "gpm:%u", m->metricId);
    m->nvmlReturn = refused(name, d);
    if (m->nvmlReturn != NVML_SUCCESS) continue;
    if (gpm_percent(m->metricId))
      m->value = (double)m->metricId + 10.0 * d + (double)(b->k % 10);
    else if (gpm_bandwidth(m->metricId) && d == 1 && m->metricId >= 60)
      m->nvmlReturn = NVML_ERROR_NOT_SUPPORTED; /* device 1 has no NVLink, in GPM either */
    else if (gpm_bandwidth(m->metricId))
      m->value = 10.0 * m->metricId + d;
    else
      m->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
  }
  return leave(NVML_SUCCESS);
}
#endif

/* ---- XID events (nvmlEventSetCreate, nvmlDeviceRegisterEvents, nvmlEventSetWait_v2, nvmlEventSetFree) ----
 * Absent from the -DFAKE_NVML_NO_EVENTS build (FUNCTION_NOT_FOUND); kept in the minimal one (the event API is
 * older than the _v2 getters). Read at nvmlEventSetCreate:
 *   FAKE_NVML_XIDS=<dev>:<xid>:<ms>,...  XIDs delivered to a wait once <ms> after the first nvmlInit have
 *                                        passed, in this order, on a device that registered for them
 *   FAKE_NVML_EVENTS_UNSUPPORTED=1       device 1 answers NOT_SUPPORTED to nvmlDeviceRegisterEvents
 *   FAKE_NVML_WAIT_ERROR=<code>          every nvmlEventSetWait_v2 returns that nvmlReturn_t at once
 * A wait with nothing due blocks until its timeout (or the next XID due) and returns NVML_ERROR_TIMEOUT;
 * FAKE_NVML_HANG_CALL=nvmlEventSetWait_v2 with FAKE_NVML_HANG_AT=-1 makes every wait block for
 * FAKE_NVML_HANG_MS regardless of its timeout. A wait counts as a call in flight (fake_nvml_unsafe_shutdowns).
 * fake_nvml_xids_sent() says how many scripted XIDs were delivered. */
#ifndef FAKE_NVML_NO_EVENTS
#define NVML_ERROR_TIMEOUT_ 10
#define EVENT_XID 0x8ull
typedef struct fake_event_set *nvmlEventSet_t;
typedef struct {
  nvmlDevice_t device;
  unsigned long long eventType, eventData;
  unsigned int gpuInstanceId, computeInstanceId;
} nvmlEventData_t;
_Static_assert(sizeof(nvmlEventData_t) == 32 && offsetof(nvmlEventData_t, eventData) == 16, "event data");

/* Several sets at once, as NVML allows (a sampler's waiter and the one of the refresh measurement at start): each
 * set has its own registrations and its own place in the script, so every set gets every XID (of the devices it
 * registered). The script and the modes are read again when a set is created while no other lives. */
#define MAX_SETS 4
struct fake_event_set { int live, sent; unsigned long long registered[MAX_DEVICES]; };
static struct fake_event_set event_sets[MAX_SETS];
#define MAX_XIDS 16
static struct { int dev; unsigned long long xid; long long at_ns; } xids[MAX_XIDS];
static int nxids, xids_sent, events_unsupported, wait_error;
static pthread_mutex_t sets_mu = PTHREAD_MUTEX_INITIALIZER;

/* The most XIDs any one set was given. */
EXPORT int fake_nvml_xids_sent(void) { return __atomic_load_n(&xids_sent, __ATOMIC_SEQ_CST); }

static void parse_xids(void) {
  nxids = 0;
  const char *p = getenv("FAKE_NVML_XIDS");
  while (p && *p && nxids < MAX_XIDS) {
    char *end;
    long dev = strtol(p, &end, 10);
    if (*end != ':') break;
    long xid = strtol(end + 1, &end, 10);
    if (*end != ':') break;
    long ms = strtol(end + 1, &end, 10);
    xids[nxids].dev = (int)dev;
    xids[nxids].xid = (unsigned long long)xid;
    xids[nxids].at_ns = ms * 1000000ll;
    ++nxids;
    if (*end != ',') break;
    p = end + 1;
  }
}
static struct fake_event_set *live_set(nvmlEventSet_t set) {
  for (int i = 0; i < MAX_SETS; ++i)
    if (set == &event_sets[i] && __atomic_load_n(&event_sets[i].live, __ATOMIC_SEQ_CST)) return &event_sets[i];
  return NULL;
}
EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set) {
  bump("nvmlEventSetCreate", -1);
  if (refcount <= 0) return NVML_ERROR_UNINITIALIZED;
  pthread_mutex_lock(&sets_mu);
  int any = 0, free_at = -1;
  for (int i = 0; i < MAX_SETS; ++i) {
    if (event_sets[i].live) any = 1;
    else if (free_at < 0) free_at = i;
  }
  if (!any) {
    parse_xids();
    __atomic_store_n(&xids_sent, 0, __ATOMIC_SEQ_CST);
    events_unsupported = (int)env_long("FAKE_NVML_EVENTS_UNSUPPORTED", 0);
    wait_error = (int)env_long("FAKE_NVML_WAIT_ERROR", 0);
  }
  if (free_at < 0) {
    pthread_mutex_unlock(&sets_mu);
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  struct fake_event_set *s = &event_sets[free_at];
  memset(s, 0, sizeof *s);
  __atomic_store_n(&s->live, 1, __ATOMIC_SEQ_CST);
  pthread_mutex_unlock(&sets_mu);
  *set = s;
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t dev, unsigned long long types, nvmlEventSet_t set) {
  ENTER("nvmlDeviceRegisterEvents", dev);
  struct fake_event_set *s = live_set(set);
  if (!s || types == 0) return leave(NVML_ERROR_INVALID_ARGUMENT);
  if (events_unsupported && d == 1) return leave(NVML_ERROR_NOT_SUPPORTED);
  __atomic_or_fetch(&s->registered[d], types & EVENT_XID, __ATOMIC_SEQ_CST);
  return leave(NVML_SUCCESS);
}
/* The set's next scripted XID, in order, once due: its index, or -1; *due: when the next one is due (-1: none). */
static int next_xid(const struct fake_event_set *s, long long now_rel, long long *due) {
  int i = s->sent;
  *due = -1;
  if (i >= nxids) return -1;
  if (xids[i].at_ns > now_rel) {
    *due = xids[i].at_ns;
    return -1;
  }
  return i;
}
EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms) {
  __atomic_add_fetch(&inflight, 1, __ATOMIC_SEQ_CST);
  long n = bump("nvmlEventSetWait_v2", -1);
  maybe_hang("nvmlEventSetWait_v2", -1, n);  /* FAKE_NVML_HANG_AT=-1: every wait */
  if (__atomic_load_n(&refcount, __ATOMIC_SEQ_CST) <= 0) {
    __atomic_add_fetch(&uninitialized_calls, 1, __ATOMIC_SEQ_CST);
    return leave(NVML_ERROR_UNINITIALIZED);
  }
  struct fake_event_set *s = live_set(set);
  if (!s || !data) return leave(NVML_ERROR_INVALID_ARGUMENT);
  if (wait_error) return leave(wait_error);
  long long deadline = mono_ns() + (long long)timeoutms * 1000000ll;
  for (;;) {
    long long now = mono_ns(), due;
    int i = next_xid(s, now - t0_ns, &due);
    if (i >= 0) {
      s->sent = i + 1;  /* one waiter per set: no race on its order */
      int most = __atomic_load_n(&xids_sent, __ATOMIC_SEQ_CST);
      while (s->sent > most && !__atomic_compare_exchange_n(&xids_sent, &most, s->sent, 0, __ATOMIC_SEQ_CST,
                                                            __ATOMIC_SEQ_CST)) {
      }
      int dev = xids[i].dev;
      if (dev < 0 || dev >= cfg_devices || !(s->registered[dev] & EVENT_XID)) continue;  /* not delivered */
      memset(data, 0, sizeof *data);
      data->device = &devices[dev];
      data->eventType = EVENT_XID;
      data->eventData = xids[i].xid;
      data->gpuInstanceId = data->computeInstanceId = 0xFFFFFFFFu;
      return leave(NVML_SUCCESS);
    }
    if (now >= deadline) return leave(NVML_ERROR_TIMEOUT_);
    long long until = due >= 0 && t0_ns + due < deadline ? t0_ns + due : deadline;
    long long ns = until - now;
    struct timespec ts = {(time_t)(ns / 1000000000ll), (long)(ns % 1000000000ll)};
    nanosleep(&ts, NULL);
  }
}
EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  bump("nvmlEventSetFree", -1);
  if (refcount <= 0) return NVML_ERROR_UNINITIALIZED;
  struct fake_event_set *s = live_set(set);
  if (!s) return NVML_ERROR_INVALID_ARGUMENT;
  __atomic_store_n(&s->live, 0, __ATOMIC_SEQ_CST);
  return NVML_SUCCESS;
}
#endif

/* ---- the driver's buffered samples (nvmlDeviceGetSamples): benchmarks/gpu_check.py, and the driver_samples series
 * (csrc/gpu/nvml_samples.hpp, sysprof/sampling/portable/nvml_samples.py) ----
 * Device 0 keeps a sample every 20 ms of the fake's clock, the latest 50 (1 s): sample k (counted from the first
 * nvmlInit; negative before it: the buffer is always full) has the timeStamp W + 20000 k (CLOCK_REALTIME us; W =
 * fake_nvml_samples_wall0_us(), fixed at the first call) and, as an unsigned int,
 *   NVML_TOTAL_POWER_SAMPLES (0)   250000 + 1000 (k % 10) mW
 *   NVML_GPU_UTILIZATION_SAMPLES (1)  k % 101 %
 *   NVML_PROCESSOR_CLK_SAMPLES (5) 1500 + k % 10 MHz
 *   NVML_MEMORY_CLK_SAMPLES (6)    2600 + k % 10 MHz
 * Only samples newer than lastSeenTimeStamp are returned, NVML_ERROR_NOT_FOUND when there is none; samples NULL
 * asks for the count to allocate (50). NVML_MEMORY_UTILIZATION_SAMPLES (2), other types, and every type on
 * device 1, answer NOT_SUPPORTED; the minimal build lacks the symbol (an older driver).
 * FAKE_NVML_SAMPLES_BURST=<n>: instead, every call hands out n samples (more than the side buffer holds, with n
 * large), 1 us apart right after lastSeenTimeStamp: timeStamp s = lastSeen + 1 .. lastSeen + n, the value that of
 * k = s above; samples NULL asks for n. fake_nvml_samples_returned() counts the samples handed out (either way). */
#ifndef FAKE_NVML_MINIMAL
typedef struct { unsigned long long timeStamp; nvmlValue_t sampleValue; } nvmlSample_t;
_Static_assert(sizeof(nvmlSample_t) == 16 && offsetof(nvmlSample_t, sampleValue) == 8, "nvmlSample_t");
#define SAMPLE_NS 20000000ll
#define SAMPLES_KEPT 50
static long long samples_wall0_us = -1, samples_returned;
EXPORT long long fake_nvml_samples_returned(void) { return __atomic_load_n(&samples_returned, __ATOMIC_SEQ_CST); }
EXPORT long long fake_nvml_samples_wall0_us(void) { return __atomic_load_n(&samples_wall0_us, __ATOMIC_SEQ_CST); }
static unsigned sample_value(int type, long long k) {
  long long k10 = (k % 10 + 10) % 10, k101 = (k % 101 + 101) % 101;
  switch (type) {
    case 0: return (unsigned)(250000 + 1000 * k10);
    case 1: return (unsigned)k101;
    case 5: return (unsigned)(1500 + k10);
    default: return (unsigned)(2600 + k10);
  }
}
EXPORT nvmlReturn_t nvmlDeviceGetSamples(nvmlDevice_t dev, int type, unsigned long long last_seen, int *value_type,
                                         unsigned int *count, nvmlSample_t *samples) {
  ENTER("nvmlDeviceGetSamples", dev);
  if (!count || !value_type) return leave(NVML_ERROR_INVALID_ARGUMENT);
  if (d != 0 || !(type == 0 || type == 1 || type == 5 || type == 6)) return leave(NVML_ERROR_NOT_SUPPORTED);
  long long now = mono_ns();
  long long w = -1, mine = (wall_ns() - (now - t0_ns)) / 1000;
  __atomic_compare_exchange_n(&samples_wall0_us, &w, mine, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  long long wall0 = fake_nvml_samples_wall0_us();
  long long newest = (now - t0_ns) / SAMPLE_NS, first = newest - SAMPLES_KEPT + 1;
  unsigned got = 0, cap = *count;
  *value_type = VT_UINT;
  if (cfg_samples_burst > 0) {
    unsigned n = (unsigned)cfg_samples_burst;
    if (samples && cap < n) return leave(NVML_ERROR_INSUFFICIENT_SIZE);
    for (unsigned i = 0; samples && i < n; ++i) {
      samples[i].timeStamp = last_seen + 1 + i;
      samples[i].sampleValue.uiVal = sample_value(type, (long long)(last_seen + 1 + i));
    }
    if (samples) __atomic_add_fetch(&samples_returned, (long long)n, __ATOMIC_SEQ_CST);
    *count = n;
    return leave(NVML_SUCCESS);
  }
  if (!samples) {
    *count = SAMPLES_KEPT;  /* the size to allocate, as NVML answers a NULL buffer */
    return leave(NVML_SUCCESS);
  }
  for (long long k = first; k <= newest; ++k) {
    unsigned long long ts = (unsigned long long)(wall0 + k * (SAMPLE_NS / 1000));
    if (ts <= last_seen) continue;
    if (got >= cap) return leave(NVML_ERROR_INSUFFICIENT_SIZE);
    samples[got].timeStamp = ts;
    samples[got].sampleValue.uiVal = sample_value(type, k);
    ++got;
  }
  *count = got;
  __atomic_add_fetch(&samples_returned, (long long)got, __ATOMIC_SEQ_CST);
  return leave(got ? NVML_SUCCESS : NVML_ERROR_NOT_FOUND);
}
#endif

// The subset of the NVML C ABI that sysprof uses, declared here so that the extension builds without
// NVIDIA's header or library (it is loaded with dlopen at run time).
//
// Written from NVIDIA's public descriptions: the NVML API reference (docs.nvidia.com/deploy/nvml-api)
// and NVIDIA's own Python bindings, nvidia-ml-py's pynvml.py (13.615.71), which declares the same
// values and ctypes layouts. Where a value is taken from pynvml.py the comment says so; the layouts are
// pinned by the static_asserts below (sizes and offsets as the ctypes structures have them on x86-64
// and aarch64 Linux).
#pragma once
#include <cstddef>
#include <cstdint>

namespace sysprof {
namespace nvml {

using Return = int;  // nvmlReturn_t: a C enum, int-sized
using Device = struct DeviceSt*;  // nvmlDevice_t: an opaque handle

// nvmlReturn_t values (pynvml.py NVML_SUCCESS ... NVML_ERROR_UNKNOWN).
enum : Return {
  kSuccess = 0,
  kErrorUninitialized = 1,
  kErrorInvalidArgument = 2,
  kErrorNotSupported = 3,
  kErrorNoPermission = 4,
  kErrorAlreadyInitialized = 5,
  kErrorNotFound = 6,
  kErrorInsufficientSize = 7,
  kErrorInsufficientPower = 8,
  kErrorDriverNotLoaded = 9,
  kErrorTimeout = 10,
  kErrorIrqIssue = 11,
  kErrorLibraryNotFound = 12,
  kErrorFunctionNotFound = 13,
  kErrorCorruptedInforom = 14,
  kErrorGpuIsLost = 15,
  kErrorResetRequired = 16,
  kErrorOperatingSystem = 17,
  kErrorLibRmVersionMismatch = 18,
  kErrorInUse = 19,
  kErrorMemory = 20,
  kErrorNoData = 21,
  kErrorArgumentVersionMismatch = 25,
  kErrorDeprecated = 26,
  kErrorNotReady = 27,
  kErrorGpuNotFound = 28,
  kErrorUnknown = 999,
};

// nvmlTemperatureSensors_t NVML_TEMPERATURE_GPU; nvmlClockType_t NVML_CLOCK_SM, NVML_CLOCK_MEM (pynvml.py).
constexpr int kTemperatureGpu = 0;
constexpr int kClockSm = 1;
constexpr int kClockMem = 2;
constexpr int kPcieUtilTxBytes = 0;  // nvmlPcieUtilCounter_t NVML_PCIE_UTIL_TX_BYTES
constexpr int kPcieUtilRxBytes = 1;  // NVML_PCIE_UTIL_RX_BYTES

// nvmlValueType_t (pynvml.py NVML_VALUE_TYPE_*).
enum : int {
  kValueDouble = 0,
  kValueUnsignedInt = 1,
  kValueUnsignedLong = 2,
  kValueUnsignedLongLong = 3,
  kValueSignedLongLong = 4,
  kValueSignedInt = 5,
  kValueUnsignedShort = 6,
};

// Buffer sizes for names (NVML_DEVICE_NAME_V2_BUFFER_SIZE, NVML_DEVICE_UUID_V2_BUFFER_SIZE in pynvml.py).
constexpr unsigned kNameBufferSize = 96;
constexpr unsigned kUuidBufferSize = 96;

struct Utilization {  // nvmlUtilization_t: percent of the last sample period
  unsigned gpu;
  unsigned memory;
};

struct MemoryV1 {  // nvmlMemory_t, bytes
  unsigned long long total, free, used;
};

struct MemoryV2 {  // nvmlMemory_v2_t, bytes; `free` excludes `reserved`
  unsigned version;
  unsigned long long total, reserved, free, used;
};
// NVML_STRUCT_VERSION(Memory, 2) = sizeof(nvmlMemory_v2_t) | 2 << 24 (pynvml.py: nvmlMemory_v2 = 0x02000028).
constexpr unsigned kMemoryV2Version = unsigned(sizeof(MemoryV2)) | (2u << 24);

struct TemperatureV1 {  // nvmlTemperature_v1_t
  unsigned version;
  int sensorType;
  int temperature;  // degrees C
};
// pynvml.py: nvmlTemperature_v1 = 0x100000C.
constexpr unsigned kTemperatureV1Version = unsigned(sizeof(TemperatureV1)) | (1u << 24);

union Value {  // nvmlValue_t
  double dVal;
  int siVal;
  unsigned uiVal;
  unsigned long ulVal;
  unsigned long long ullVal;
  long long sllVal;
  unsigned short usVal;
};

struct FieldValue {  // nvmlFieldValue_t
  unsigned fieldId;
  unsigned scopeId;
  long long timestamp;  // us since the epoch
  long long latencyUsec;
  int valueType;  // nvmlValueType_t
  Return nvmlReturn;  // per entry: `value` is valid only when this is kSuccess
  Value value;
};

struct PciInfo {  // nvmlPciInfo_t (as filled by nvmlDeviceGetPciInfo_v3)
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];  // "domain:bus:device.function", NUL-terminated
};

// XID events (nvmlEventSetCreate, nvmlDeviceRegisterEvents, nvmlEventSetWait_v2, nvmlEventSetFree).
using EventSet = struct EventSetSt*;  // nvmlEventSet_t: an opaque handle
constexpr unsigned long long kEventTypeXidCriticalError = 0x8;  // pynvml.py nvmlEventTypeXidCriticalError
struct EventData {  // nvmlEventData_t
  Device device;  // the device the event is about
  unsigned long long eventType;  // one nvmlEventType* bit
  unsigned long long eventData;  // for an XID: its number (999: unknown)
  unsigned gpuInstanceId, computeInstanceId;  // MIG: the instance, else 0xFFFFFFFF
};

static_assert(sizeof(EventData) == 32 && offsetof(EventData, eventType) == 8 && offsetof(EventData, eventData) == 16 &&
                  offsetof(EventData, gpuInstanceId) == 24,
              "nvmlEventData_t layout");
static_assert(sizeof(MemoryV2) == 40 && offsetof(MemoryV2, total) == 8, "nvmlMemory_v2_t layout");
static_assert(kMemoryV2Version == 0x02000028u, "nvmlMemory_v2 version");
static_assert(kTemperatureV1Version == 0x0100000Cu, "nvmlTemperature_v1 version");
static_assert(sizeof(Value) == 8, "nvmlValue_t layout");
static_assert(sizeof(FieldValue) == 40 && offsetof(FieldValue, valueType) == 24 &&
                  offsetof(FieldValue, nvmlReturn) == 28 && offsetof(FieldValue, value) == 32,
              "nvmlFieldValue_t layout");
static_assert(sizeof(PciInfo) == 68 && offsetof(PciInfo, busId) == 36, "nvmlPciInfo_t layout");

// The driver's buffered samples (nvmlDeviceGetSamples): nvmlSamplingType_t values (pynvml.py NVML_*_SAMPLES).
enum SamplingType : int {
  kTotalPowerSamples = 0,  // mW
  kGpuUtilizationSamples = 1,  // %
  kMemoryUtilizationSamples = 2,  // %
  kProcessorClkSamples = 5,  // MHz
  kMemoryClkSamples = 6,  // MHz
};
struct Sample {  // nvmlSample_t
  unsigned long long timeStamp;  // CPU wall clock, us since the epoch
  Value sampleValue;  // of the nvmlValueType_t the call reports
};
static_assert(sizeof(Sample) == 16 && offsetof(Sample, sampleValue) == 8, "nvmlSample_t layout");

// Function types, by the names the library exports.
using InitFn = Return (*)();  // nvmlInit_v2
using ShutdownFn = Return (*)();  // nvmlShutdown
using GetCountFn = Return (*)(unsigned*);  // nvmlDeviceGetCount_v2
using GetHandleByIndexFn = Return (*)(unsigned, Device*);  // nvmlDeviceGetHandleByIndex_v2
using GetStringFn = Return (*)(Device, char*, unsigned);  // nvmlDeviceGetName, nvmlDeviceGetUUID
using GetPciInfoFn = Return (*)(Device, PciInfo*);  // nvmlDeviceGetPciInfo_v3
using GetUtilizationFn = Return (*)(Device, Utilization*);  // nvmlDeviceGetUtilizationRates
using GetMemoryV1Fn = Return (*)(Device, MemoryV1*);  // nvmlDeviceGetMemoryInfo
using GetMemoryV2Fn = Return (*)(Device, MemoryV2*);  // nvmlDeviceGetMemoryInfo_v2
using GetUintFn = Return (*)(Device, unsigned*);  // nvmlDeviceGetPowerUsage (mW)
using GetUllFn = Return (*)(Device, unsigned long long*);  // nvmlDeviceGetTotalEnergyConsumption (mJ)
using GetTemperatureFn = Return (*)(Device, int, unsigned*);  // nvmlDeviceGetTemperature
using GetTemperatureVFn = Return (*)(Device, TemperatureV1*);  // nvmlDeviceGetTemperatureV
// nvmlDeviceGetClockInfo (MHz), nvmlDeviceGetPcieThroughput (KB/s)
using GetClockFn = Return (*)(Device, int, unsigned*);
using GetFieldValuesFn = Return (*)(Device, int, FieldValue*);  // nvmlDeviceGetFieldValues
// nvmlDeviceGetSamples(device, type, lastSeenTimeStamp, *sampleValType, *sampleCount, samples)
using GetSamplesFn = Return (*)(Device, int, unsigned long long, int*, unsigned*, Sample*);
using EventSetCreateFn = Return (*)(EventSet*);  // nvmlEventSetCreate
using RegisterEventsFn = Return (*)(Device, unsigned long long, EventSet);  // nvmlDeviceRegisterEvents
using EventSetWaitFn = Return (*)(EventSet, EventData*, unsigned);  // nvmlEventSetWait_v2 (timeout in ms)
using EventSetFreeFn = Return (*)(EventSet);  // nvmlEventSetFree

// ---- Throttling and health (issue 13, item 2; values and layouts from pynvml.py 13.615.71)
// nvmlPerfPolicyType_t NVML_PERF_POLICY_POWER / _THERMAL; nvmlMemoryErrorType_t; nvmlEccCounterType_t.
constexpr int kPerfPolicyPower = 0;
constexpr int kPerfPolicyThermal = 1;
constexpr int kMemoryErrorCorrected = 0;
constexpr int kMemoryErrorUncorrected = 1;
constexpr int kVolatileEcc = 0;  // since the driver loaded (NVML_AGGREGATE_ECC = 1: over the device's life)

struct ViolationTime {  // nvmlViolationTime_t
  unsigned long long referenceTime;  // us, CLOCK_REALTIME
  unsigned long long violationTime;  // ns the policy held the clocks down, since the driver loaded
};
static_assert(sizeof(ViolationTime) == 16 && offsetof(ViolationTime, violationTime) == 8, "nvmlViolationTime_t layout");

// nvmlDeviceGetCurrentClocksEventReasons (r535+) and its older name ...ThrottleReasons: a bitmask.
using GetReasonsFn = Return (*)(Device, unsigned long long*);
using GetViolationFn = Return (*)(Device, int, ViolationTime*);  // nvmlDeviceGetViolationStatus
using GetEccFn = Return (*)(Device, int, int, unsigned long long*);  // nvmlDeviceGetTotalEccErrors
// nvmlDeviceGetRemappedRows(device, corrRows, uncRows, isPending, failureOccurred)
using GetRemappedRowsFn = Return (*)(Device, unsigned*, unsigned*, unsigned*, unsigned*);
// nvmlDeviceGetPcieReplayCounter, nvmlDeviceGetEnforcedPowerLimit (mW), nvmlDeviceGetCurrPcieLinkGeneration,
// nvmlDeviceGetCurrPcieLinkWidth: GetUintFn.

// ---- GPU Performance Monitoring, Hopper and newer (issue 13, item 1; pynvml.py 13.615.71)
using GpmSample = struct GpmSampleSt*;  // nvmlGpmSample_t: an opaque buffer the library allocates

struct GpmSupport {  // nvmlGpmSupport_t
  unsigned version;  // NVML_GPM_SUPPORT_VERSION
  unsigned isSupportedDevice;
};
constexpr unsigned kGpmSupportVersion = 1;

struct GpmMetricInfo {  // nvmlGpmMetric_t's metricInfo: strings owned by the library
  char* shortName;
  char* longName;
  char* unit;
};
struct GpmMetric {  // nvmlGpmMetric_t
  unsigned metricId;  // NVML_GPM_METRIC_*
  Return nvmlReturn;  // per metric
  double value;
  GpmMetricInfo metricInfo;
};
// NVML_GPM_METRIC_MAX: the array's length in the newest header (a driver fills numMetrics entries only;
// the full length keeps the buffer as large as any header has it).
constexpr unsigned kGpmMetricMax = 477;
struct GpmMetricsGet {  // nvmlGpmMetricsGet_t
  unsigned version;  // NVML_GPM_METRICS_GET_VERSION
  unsigned numMetrics;
  GpmSample sample1, sample2;  // the earlier and the later sample
  GpmMetric metrics[kGpmMetricMax];
};
constexpr unsigned kGpmMetricsGetVersion = 1;
static_assert(sizeof(GpmSupport) == 8, "nvmlGpmSupport_t layout");
static_assert(sizeof(GpmMetric) == 40 && offsetof(GpmMetric, value) == 8 && offsetof(GpmMetric, metricInfo) == 16,
              "nvmlGpmMetric_t layout");
static_assert(offsetof(GpmMetricsGet, sample1) == 8 && offsetof(GpmMetricsGet, sample2) == 16 &&
                  offsetof(GpmMetricsGet, metrics) == 24 && sizeof(GpmMetricsGet) == 24 + 40 * kGpmMetricMax,
              "nvmlGpmMetricsGet_t layout");

using GpmQueryDeviceSupportFn = Return (*)(Device, GpmSupport*);  // nvmlGpmQueryDeviceSupport
using GpmSampleAllocFn = Return (*)(GpmSample*);  // nvmlGpmSampleAlloc
using GpmSampleFreeFn = Return (*)(GpmSample);  // nvmlGpmSampleFree
using GpmSampleGetFn = Return (*)(Device, GpmSample);  // nvmlGpmSampleGet
using GpmMetricsGetFn = Return (*)(GpmMetricsGet*);  // nvmlGpmMetricsGet

// ---- MIG (issue 13, item 5): nvmlDeviceGetMigMode(device, currentMode, pendingMode), NVML_DEVICE_MIG_ENABLE = 1;
// nvmlDeviceGetMaxMigDeviceCount(device, count); nvmlDeviceGetMigDeviceHandleByIndex(device, index, migDevice).
constexpr unsigned kMigEnable = 1;
using GetMigModeFn = Return (*)(Device, unsigned*, unsigned*);
using GetMigDeviceHandleFn = Return (*)(Device, unsigned, Device*);

// Symbolic name of a return code, for messages (never calls into the library, which may be hung).
inline const char* return_name(Return r) {
  switch (r) {
    case kSuccess: return "NVML_SUCCESS";
    case kErrorUninitialized: return "NVML_ERROR_UNINITIALIZED";
    case kErrorInvalidArgument: return "NVML_ERROR_INVALID_ARGUMENT";
    case kErrorNotSupported: return "NVML_ERROR_NOT_SUPPORTED";
    case kErrorNoPermission: return "NVML_ERROR_NO_PERMISSION";
    case kErrorAlreadyInitialized: return "NVML_ERROR_ALREADY_INITIALIZED";
    case kErrorNotFound: return "NVML_ERROR_NOT_FOUND";
    case kErrorInsufficientSize: return "NVML_ERROR_INSUFFICIENT_SIZE";
    case kErrorInsufficientPower: return "NVML_ERROR_INSUFFICIENT_POWER";
    case kErrorDriverNotLoaded: return "NVML_ERROR_DRIVER_NOT_LOADED";
    case kErrorTimeout: return "NVML_ERROR_TIMEOUT";
    case kErrorIrqIssue: return "NVML_ERROR_IRQ_ISSUE";
    case kErrorLibraryNotFound: return "NVML_ERROR_LIBRARY_NOT_FOUND";
    case kErrorFunctionNotFound: return "NVML_ERROR_FUNCTION_NOT_FOUND";
    case kErrorCorruptedInforom: return "NVML_ERROR_CORRUPTED_INFOROM";
    case kErrorGpuIsLost: return "NVML_ERROR_GPU_IS_LOST";
    case kErrorResetRequired: return "NVML_ERROR_RESET_REQUIRED";
    case kErrorOperatingSystem: return "NVML_ERROR_OPERATING_SYSTEM";
    case kErrorLibRmVersionMismatch: return "NVML_ERROR_LIB_RM_VERSION_MISMATCH";
    case kErrorInUse: return "NVML_ERROR_IN_USE";
    case kErrorMemory: return "NVML_ERROR_MEMORY";
    case kErrorNoData: return "NVML_ERROR_NO_DATA";
    case kErrorArgumentVersionMismatch: return "NVML_ERROR_ARGUMENT_VERSION_MISMATCH";
    case kErrorDeprecated: return "NVML_ERROR_DEPRECATED";
    case kErrorNotReady: return "NVML_ERROR_NOT_READY";
    case kErrorGpuNotFound: return "NVML_ERROR_GPU_NOT_FOUND";
    case kErrorUnknown: return "NVML_ERROR_UNKNOWN";
    default: return "NVML error";
  }
}

}  // namespace nvml
}  // namespace sysprof

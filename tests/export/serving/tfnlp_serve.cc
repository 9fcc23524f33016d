// tfnlp_serve: serves SavedModels the way TensorFlow Serving does, for the tests.
//
// TF Serving's core is TensorFlow's C++ SavedModel loader: `LoadSavedModel`
// imports the MetaGraph tagged "serve", runs the saver's restore op and the
// init op in a `Session`; a Predict request then feeds the signature's input
// tensors by name and fetches its outputs (tensorflow_serving/servables/
// tensorflow/predict_util.cc). This program does exactly that, built against
// the headers and libraries in the `tensorflow` wheel, with tensorflow-text's
// op libraries loaded first (the stock server links them in). No Python runs
// here, so nothing of tfnlp can be imported by accident.
//
// Usage: tfnlp_serve [--ops-dir DIR]... [--xla_cpu_compilation_enabled]
//   Every *.so in each DIR is dlopen'ed with RTLD_GLOBAL (the op libraries).
//   As in tensorflow_model_server (model_servers/main.cc), XLA compilation is
//   disabled unless --xla_cpu_compilation_enabled (or
//   --xla_gpu_compilation_enabled) is given, with or without "=true".
//
// Requests come on stdin as frames: one command byte, a little-endian uint32
// payload length, the payload. Each gets one reply on stdout (anything else
// that writes to stdout is sent to stderr instead): a status byte
// ('0' done, 'E' failed: the payload is the error), a little-endian uint64 of
// microseconds (what the command took inside this process: the load, or the
// Session::Run), a little-endian uint32 length, the payload.
//
//   'L' PATH             load the SavedModel at PATH (tag "serve")
//   'U' PATH             forget it
//   'P' PredictRequest   serialized tensorflow.serving.PredictRequest whose
//                        model_spec.name is a loaded PATH; the reply is a
//                        serialized PredictResponse
//   'W' PATH             replay PATH/assets.extra/tf_serving_warmup_requests
//                        as TF Serving does on load (PredictLog records); the
//                        reply is one line per record: "SIGNATURE MICROSECONDS"
//   'B' N PredictRequest run the request N times (N a little-endian uint32);
//                        the reply is N little-endian uint64 microseconds
//
// The protocol buffers of TF Serving (PredictRequest, PredictionLog) are read
// and written here with a small wire-format codec: their C++ classes are not
// in the wheel. Their tensors are tensorflow::TensorProto, parsed by TensorFlow.

#include <dirent.h>
#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tensorflow/cc/saved_model/loader.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor.pb.h"
#include "tensorflow/core/lib/io/record_reader.h"
#include "tensorflow/core/platform/env.h"
#include "tensorflow/core/platform/file_system.h"

namespace tensorflow {
// tensorflow/compiler/jit/flags.h; exported by libtensorflow_cc.so.2.
void DisableXlaCompilation();
}  // namespace tensorflow

namespace {

using tensorflow::Status;

// TF Serving's limit on warm-up records (saved_model_warmup_util.cc).
constexpr int kMaxWarmupRecords = 1000;

// --- Protocol-buffer wire format: just what the serving messages need ---

struct Field {
  uint32_t number = 0;
  uint32_t wire_type = 0;
  uint64_t varint = 0;   // wire type 0
  std::string bytes;     // wire type 2 (length-delimited)
};

bool ReadVarint(const std::string& data, size_t* pos, uint64_t* value) {
  *value = 0;
  for (int shift = 0; shift < 64 && *pos < data.size(); shift += 7) {
    uint8_t byte = static_cast<uint8_t>(data[(*pos)++]);
    *value |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if (!(byte & 0x80)) return true;
  }
  return false;
}

// Splits a serialized message into its fields; false on malformed bytes.
bool ParseFields(const std::string& data, std::vector<Field>* fields) {
  size_t pos = 0;
  while (pos < data.size()) {
    uint64_t key;
    if (!ReadVarint(data, &pos, &key)) return false;
    Field field;
    field.number = static_cast<uint32_t>(key >> 3);
    field.wire_type = static_cast<uint32_t>(key & 7);
    switch (field.wire_type) {
      case 0:
        if (!ReadVarint(data, &pos, &field.varint)) return false;
        break;
      case 1:
        if (pos + 8 > data.size()) return false;
        pos += 8;
        break;
      case 2: {
        uint64_t length;
        if (!ReadVarint(data, &pos, &length) || length > data.size() - pos) return false;
        field.bytes = data.substr(pos, length);
        pos += length;
        break;
      }
      case 5:
        if (pos + 4 > data.size()) return false;
        pos += 4;
        break;
      default:
        return false;
    }
    fields->push_back(std::move(field));
  }
  return true;
}

void WriteVarint(uint64_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

void WriteBytes(uint32_t number, const std::string& bytes, std::string* out) {
  WriteVarint((static_cast<uint64_t>(number) << 3) | 2, out);
  WriteVarint(bytes.size(), out);
  out->append(bytes);
}

// --- TF Serving's Predict ---

struct Request {
  std::string model;      // model_spec.name: here, the path it was loaded from
  std::string signature;  // model_spec.signature_name ("" = serving_default)
  std::vector<std::pair<std::string, tensorflow::TensorProto>> inputs;
  std::vector<std::string> output_filter;
};

Status ParseRequest(const std::string& bytes, Request* request) {
  std::vector<Field> fields;
  if (!ParseFields(bytes, &fields)) {
    return tensorflow::errors::InvalidArgument("malformed PredictRequest");
  }
  for (const Field& field : fields) {
    if (field.number == 1 && field.wire_type == 2) {  // model_spec
      std::vector<Field> spec;
      if (!ParseFields(field.bytes, &spec)) {
        return tensorflow::errors::InvalidArgument("malformed ModelSpec");
      }
      for (const Field& f : spec) {
        if (f.number == 1 && f.wire_type == 2) request->model = f.bytes;
        if (f.number == 3 && f.wire_type == 2) request->signature = f.bytes;
      }
    } else if (field.number == 2 && field.wire_type == 2) {  // inputs: map<string, TensorProto>
      std::vector<Field> entry;
      if (!ParseFields(field.bytes, &entry)) {
        return tensorflow::errors::InvalidArgument("malformed inputs entry");
      }
      std::string key;
      tensorflow::TensorProto value;
      for (const Field& f : entry) {
        if (f.number == 1 && f.wire_type == 2) key = f.bytes;
        if (f.number == 2 && f.wire_type == 2 && !value.ParseFromString(f.bytes)) {
          return tensorflow::errors::InvalidArgument("malformed TensorProto");
        }
      }
      request->inputs.emplace_back(key, std::move(value));
    } else if (field.number == 3 && field.wire_type == 2) {  // output_filter
      request->output_filter.push_back(field.bytes);
    }
  }
  return Status();
}

using Clock = std::chrono::steady_clock;

uint64_t MicrosSince(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count();
}

class Server {
 public:
  Status Load(const std::string& path, uint64_t* micros) {
    auto start = Clock::now();
    auto bundle = std::make_unique<tensorflow::SavedModelBundle>();
    tensorflow::SessionOptions session_options;
    tensorflow::RunOptions run_options;
    Status status = tensorflow::LoadSavedModel(session_options, run_options, path,
                                               {"serve"}, bundle.get());
    *micros = MicrosSince(start);
    if (!status.ok()) return status;
    bundles_[path] = std::move(bundle);
    return Status();
  }

  void Unload(const std::string& path) { bundles_.erase(path); }

  // What predict_util.cc does: the signature, inputs named exactly as the
  // signature's, the outputs (all of them, or the filtered ones).
  Status Predict(const Request& request, std::string* response, uint64_t* micros) {
    auto found = bundles_.find(request.model);
    if (found == bundles_.end()) {
      return tensorflow::errors::NotFound("no model loaded from '", request.model, "'");
    }
    tensorflow::SavedModelBundle& bundle = *found->second;
    const std::string name = request.signature.empty() ? "serving_default" : request.signature;
    const auto& signatures = bundle.meta_graph_def.signature_def();
    auto signature = signatures.find(name);
    if (signature == signatures.end()) {
      return tensorflow::errors::FailedPrecondition("Serving signature key \"", name,
                                                    "\" not found.");
    }
    const auto& spec = signature->second;
    std::set<std::string> sent, expected;
    for (const auto& input : request.inputs) sent.insert(input.first);
    for (const auto& input : spec.inputs()) expected.insert(input.first);
    if (sent != expected) {
      std::string names;
      for (const auto& n : expected) names += " " + n;
      return tensorflow::errors::InvalidArgument(
          "input keys do not match the signature's inputs:", names);
    }
    std::vector<std::pair<std::string, tensorflow::Tensor>> feeds;
    for (const auto& input : request.inputs) {
      tensorflow::Tensor tensor;
      if (!tensor.FromProto(input.second)) {
        return tensorflow::errors::InvalidArgument("tensor parsing error: ", input.first);
      }
      feeds.emplace_back(spec.inputs().at(input.first).name(), std::move(tensor));
    }
    std::vector<std::string> aliases, fetches;
    for (const auto& alias : request.output_filter) {
      if (spec.outputs().count(alias) == 0) {
        return tensorflow::errors::InvalidArgument(
            "output tensor alias not found in signature: ", alias);
      }
    }
    for (const auto& output : spec.outputs()) {
      bool wanted = request.output_filter.empty();
      for (const auto& f : request.output_filter) wanted = wanted || f == output.first;
      if (wanted) {
        aliases.push_back(output.first);
        fetches.push_back(output.second.name());
      }
    }
    std::vector<tensorflow::Tensor> outputs;
    auto start = Clock::now();
    Status status = bundle.session->Run(feeds, fetches, {}, &outputs);
    *micros = MicrosSince(start);
    if (!status.ok()) return status;
    response->clear();
    for (size_t i = 0; i < outputs.size(); ++i) {
      tensorflow::TensorProto proto;
      if (outputs[i].dtype() == tensorflow::DT_STRING) {
        outputs[i].AsProtoField(&proto);
      } else {
        outputs[i].AsProtoTensorContent(&proto);
      }
      std::string entry;
      WriteBytes(1, aliases[i], &entry);
      WriteBytes(2, proto.SerializeAsString(), &entry);
      WriteBytes(1, entry, response);  // PredictResponse.outputs
    }
    return Status();
  }

  // TF Serving's saved_model_warmup_util.cc: every record of the file, in
  // order, through the same Predict path; the first failure fails the load.
  Status Warmup(const std::string& path, std::string* report, uint64_t* micros) {
    const std::string file = path + "/assets.extra/tf_serving_warmup_requests";
    std::unique_ptr<tensorflow::RandomAccessFile> handle;
    TF_RETURN_IF_ERROR(tensorflow::Env::Default()->NewRandomAccessFile(file, &handle));
    tensorflow::io::SequentialRecordReader reader(handle.get());
    auto start = Clock::now();
    int count = 0;
    while (true) {
      tensorflow::tstring record;
      Status status = reader.ReadRecord(&record);
      if (tensorflow::errors::IsOutOfRange(status)) break;
      TF_RETURN_IF_ERROR(status);
      if (++count > kMaxWarmupRecords) {
        return tensorflow::errors::InvalidArgument("Number of warmup records exceeds the maximum (",
                                                   kMaxWarmupRecords, ") at ", file);
      }
      std::vector<Field> log;
      if (!ParseFields(std::string(record), &log)) {
        return tensorflow::errors::InvalidArgument("record ", count, ": malformed PredictionLog");
      }
      const Field* predict_log = nullptr;
      for (const Field& f : log) {
        if (f.number == 6 && f.wire_type == 2) predict_log = &f;
      }
      if (predict_log == nullptr) {
        return tensorflow::errors::Unimplemented("record ", count, ": not a predict_log");
      }
      std::vector<Field> predict;
      if (!ParseFields(predict_log->bytes, &predict)) {
        return tensorflow::errors::InvalidArgument("record ", count, ": malformed PredictLog");
      }
      Request request;
      for (const Field& f : predict) {
        if (f.number == 1 && f.wire_type == 2) TF_RETURN_IF_ERROR(ParseRequest(f.bytes, &request));
      }
      request.model = path;  // the records name the model as the server knows it
      std::string response;
      uint64_t run_micros = 0;
      status = Predict(request, &response, &run_micros);
      if (!status.ok()) {
        return tensorflow::errors::Internal("warm-up record ", count, " (",
                                            request.signature, "): ", status.ToString());
      }
      *report += (request.signature.empty() ? "serving_default" : request.signature) + " " +
                 std::to_string(run_micros) + "\n";
    }
    *micros = MicrosSince(start);
    if (count == 0) return tensorflow::errors::NotFound(file, " holds no record");
    return Status();
  }

 private:
  std::map<std::string, std::unique_ptr<tensorflow::SavedModelBundle>> bundles_;
};

// --- Frames on stdin / stdout ---

bool ReadExactly(std::string* out, size_t size) {
  out->resize(size);
  return size == 0 || std::fread(&(*out)[0], 1, size, stdin) == size;
}

uint64_t ReadLittleEndian(const std::string& bytes, size_t offset, int size) {
  uint64_t value = 0;
  for (int i = size - 1; i >= 0; --i) value = (value << 8) | static_cast<uint8_t>(bytes[offset + i]);
  return value;
}

void AppendLittleEndian(uint64_t value, int size, std::string* out) {
  for (int i = 0; i < size; ++i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

FILE* replies = nullptr;  // the real stdout; fd 1 itself points at stderr

void Reply(const Status& status, uint64_t micros, const std::string& payload) {
  std::string frame(1, status.ok() ? '0' : 'E');
  AppendLittleEndian(micros, 8, &frame);
  const std::string& body = status.ok() ? payload : std::string(status.ToString());
  AppendLittleEndian(body.size(), 4, &frame);
  frame += body;
  std::fwrite(frame.data(), 1, frame.size(), replies);
  std::fflush(replies);
}

int LoadOpLibraries(const std::string& directory) {
  DIR* dir = opendir(directory.c_str());
  if (dir == nullptr) {
    std::cerr << "tfnlp_serve: cannot read --ops-dir " << directory << "\n";
    return -1;
  }
  int loaded = 0;
  while (dirent* entry = readdir(dir)) {
    std::string name = entry->d_name;
    if (name.size() < 3 || name.compare(name.size() - 3, 3, ".so") != 0) continue;
    std::string path = directory + "/" + name;
    if (dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL) == nullptr) {
      std::cerr << "tfnlp_serve: dlopen " << path << ": " << dlerror() << "\n";
      closedir(dir);
      return -1;
    }
    ++loaded;
  }
  closedir(dir);
  return loaded;
}

}  // namespace

int main(int argc, char** argv) {
  // Replies go to a copy of stdout; whatever a library prints goes to stderr.
  std::fflush(stdout);
  replies = fdopen(dup(1), "wb");
  dup2(2, 1);
  bool xla = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--ops-dir" && i + 1 < argc) {
      if (LoadOpLibraries(argv[++i]) < 0) return 2;
    } else if (arg == "--xla_cpu_compilation_enabled" || arg == "--xla_gpu_compilation_enabled" ||
               arg == "--xla_cpu_compilation_enabled=true" ||
               arg == "--xla_gpu_compilation_enabled=true") {
      xla = true;
    } else {
      std::cerr << "usage: tfnlp_serve [--ops-dir DIR]... [--xla_cpu_compilation_enabled]\n";
      return 2;
    }
  }
  if (!xla) tensorflow::DisableXlaCompilation();
  Server server;
  std::string header, payload;
  while (ReadExactly(&header, 5)) {
    const char command = header[0];
    if (!ReadExactly(&payload, ReadLittleEndian(header, 1, 4))) break;
    uint64_t micros = 0;
    std::string out;
    Status status;
    if (command == 'L') {
      status = server.Load(payload, &micros);
    } else if (command == 'U') {
      server.Unload(payload);
    } else if (command == 'P') {
      Request request;
      status = ParseRequest(payload, &request);
      if (status.ok()) status = server.Predict(request, &out, &micros);
    } else if (command == 'W') {
      status = server.Warmup(payload, &out, &micros);
    } else if (command == 'B' && payload.size() < 4) {
      status = tensorflow::errors::InvalidArgument("'B' needs a uint32 count before the request");
    } else if (command == 'B') {
      const uint64_t repeats = ReadLittleEndian(payload, 0, 4);
      Request request;
      status = ParseRequest(payload.substr(4), &request);
      for (uint64_t i = 0; status.ok() && i < repeats; ++i) {
        std::string response;
        uint64_t run = 0;
        status = server.Predict(request, &response, &run);
        AppendLittleEndian(run, 8, &out);
        micros += run;
      }
    } else {
      status = tensorflow::errors::InvalidArgument("unknown command");
    }
    Reply(status, micros, out);
  }
  return 0;
}

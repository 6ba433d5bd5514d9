/* Run a saved tilegrad module from C, without Python:

     python -c "import tilegrad; print(tilegrad.c_include_dir())"        # where tilegrad.h is
     cc -O2 -I "$(python -c 'import tilegrad; print(tilegrad.c_include_dir())')" run_model.c -o run_model -ldl
     ./run_model out/ inputs.bin outputs.bin

   inputs.bin holds the inputs' bytes one after the other (C order, the element types the module declares);
   outputs.bin receives the outputs' bytes the same way. The buffers are the caller's: here, malloc'd. */
#include <stdio.h>
#include <stdlib.h>

#include "tilegrad.h"

static int64_t total(const tg_buffer_info* buffers, int n) {
  int64_t bytes = 0;
  for (int i = 0; i < n; ++i) bytes += buffers[i].nbytes;
  return bytes;
}

static void show(const char* kind, const tg_buffer_info* b) {
  printf("%s %s %s[", kind, b->name, b->dtype);
  for (int d = 0; d < b->rank; ++d) printf(d ? ", %lld" : "%lld", (long long)b->shape[d]);
  printf("]\n");
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s MODULE_DIR INPUTS.bin OUTPUTS.bin\n", argv[0]);
    return 2;
  }
  char error[512];
  tg_model* model = tg_model_load(argv[1], 0, error, sizeof error);
  if (!model) {
    fprintf(stderr, "%s\n", error);
    return 1;
  }
  const tg_model_info* info = tg_model_describe(model);
  int64_t in_bytes = total(info->inputs, info->num_inputs), out_bytes = total(info->outputs, info->num_outputs);
  char* in = malloc((size_t)in_bytes + 1);
  char* out = malloc((size_t)out_bytes + 1);
  void** inputs = malloc(sizeof(void*) * (size_t)(info->num_inputs + 1));
  void** outputs = malloc(sizeof(void*) * (size_t)(info->num_outputs + 1));
  FILE* f = fopen(argv[2], "rb");
  if (!in || !out || !inputs || !outputs || !f || fread(in, 1, (size_t)in_bytes, f) != (size_t)in_bytes) {
    fprintf(stderr, "cannot read %lld bytes of inputs from %s\n", (long long)in_bytes, argv[2]);
    return 1;
  }
  fclose(f);
  for (int i = 0, at = 0; i < info->num_inputs; at += info->inputs[i++].nbytes) {
    inputs[i] = in + at;
    show("input", &info->inputs[i]);
  }
  for (int j = 0, at = 0; j < info->num_outputs; at += info->outputs[j++].nbytes) {
    outputs[j] = out + at;
    show("output", &info->outputs[j]);
  }
  tg_model_run(model, inputs, outputs);
  f = fopen(argv[3], "wb");
  if (!f || fwrite(out, 1, (size_t)out_bytes, f) != (size_t)out_bytes) {
    fprintf(stderr, "cannot write %s\n", argv[3]);
    return 1;
  }
  fclose(f);
  tg_model_free(model);
  free(in), free(out), free(inputs), free(outputs);
  return 0;
}

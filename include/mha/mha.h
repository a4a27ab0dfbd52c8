#pragma once

/// Umbrella header: everything public in mha.
#include <mha/attention_blocks.h>
#include <mha/batching.h>
#include <mha/functional.h>
#include <mha/generation.h>
#include <mha/generation_config.h>
#include <mha/generation_server.h>
#include <mha/hf_models.h>
#include <mha/hugging_face.h>
#include <mha/kernel_switches.h>
#include <mha/kv_cache.h>
#include <mha/logits_processors.h>
#include <mha/multihead_attention.h>
#include <mha/paged_kv_cache.h>
#include <mha/paged_stack_cache.h>
#include <mha/pipelines.h>
#include <mha/prepack.h>
#include <mha/quantization.h>
#include <mha/sentence_transformer.h>
#include <mha/state_dict.h>
#include <mha/stopping_criteria.h>
#include <mha/text2text_pipeline.h>
#include <mha/text_generation_pipeline.h>
#include <mha/tokenizer.h>
#include <mha/transformer.h>
#include <mha/transformer_coder.h>

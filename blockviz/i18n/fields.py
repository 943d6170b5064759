"""What each field of the scenario format means, in English and 中文: the format reference on the
Author page and the editor's completions show these (the JSON Schema's own descriptions are
English only). Keys: ``fd_<section>_<field>``, sections as ``blockviz.teach.authoring.reference``
names them (``scenario``, ``config``, ``model``, ``connector``, ``scheduler``, ``arrive``,
``decode``, and the prompt parts ``tokens``, ``text``, ``same_as``, ``random``) plus ``event`` for
an event's one value."""
from __future__ import annotations

STRINGS: dict[str, tuple[str, str]] = {
    # the file
    "fd_scenario_id": ("the scenario's name in links and file names: letters, digits, _ . -",
                       "场景的名字，用在链接和文件名里：字母、数字、_ . -"),
    "fd_scenario_title": ("the title shown in the app; {en: …, zh: …} for both languages",
                          "应用里显示的标题；用 {en: …, zh: …} 写两种语言"),
    "fd_scenario_summary": ("a sentence or two on what the scenario teaches", "一两句话说明这个场景讲什么"),
    "fd_scenario_start_note": ("narration of step 0, the state before any event",
                               "第 0 步（任何事件之前的状态）的说明"),
    "fd_scenario_start_caption": ("the caption of step 0: one sentence on the state before any event",
                                  "第 0 步的字幕：用一句话说明任何事件之前的状态"),
    "fd_scenario_config": ("the engine's configuration (see config below)", "引擎的配置（见下面的 config）"),
    "fd_scenario_steps": ("the events, one per step, in order", "事件列表，每步一个，按顺序执行"),
    # config
    "fd_config_num_blocks": ("usable GPU blocks; the null block 0 is added",
                             "可用的 GPU 块数；另外会加上 0 号 null 块"),
    "fd_config_block_size": ("tokens per block", "每个块容纳的 token 数"),
    "fd_config_hash_algo": ("how a full block's hash is computed (vLLM's prefix_caching_hash_algo)",
                            "满块的 hash 怎么计算（vLLM 的 prefix_caching_hash_algo）"),
    "fd_config_hash_seed": ("vLLM's PYTHONHASHSEED; null = vLLM's default rule",
                            "vLLM 的 PYTHONHASHSEED；null 表示沿用 vLLM 的默认规则"),
    "fd_config_free_order": ("where freed blocks go: split (vLLM >= 0.24) or append (vLLM <= 0.23)",
                             "释放的块放到哪里：split（vLLM >= 0.24）或 append（vLLM <= 0.23）"),
    "fd_config_enable_caching": ("prefix caching on or off", "是否开启前缀缓存"),
    "fd_config_seed": ("seed of random prompt parts and of the tiny model's weights",
                       "随机提示词片段和小模型权重的随机种子"),
    "fd_config_model": ("the tiny model that writes real K/V; null: no payloads",
                        "写入真实 K/V 的小模型；null 表示不带 KV 数据"),
    "fd_config_device": ("where the K/V tensors live: auto, cpu or cuda",
                         "K/V 张量放在哪里：auto、cpu 或 cuda"),
    "fd_config_connector": ("an external KV tier, e.g. {kind: cpu, num_blocks: 16}; null: none",
                            "外部 KV 缓存层，例如 {kind: cpu, num_blocks: 16}；null 表示没有"),
    "fd_config_scheduler": ("vLLM's scheduler settings (token budget, max_num_seqs, …)",
                            "vLLM 调度器的设置（token 预算、max_num_seqs 等）"),
    "fd_config_kv_cache_groups": (
        "hybrid models: one KV-cache group per attention type (full_attention, sliding_window, "
        "chunked_local_attention), all sharing one block pool; absent: one full-attention group",
        "混合模型：每种注意力类型一个 KV cache 组（full_attention、sliding_window、"
        "chunked_local_attention），所有组共用一个块池；不写则只有一个全注意力组"),
    "fd_config_prefix_cache_retention_interval": (
        "which sliding-window blocks are cached: 0 (vLLM 0.33's default) only those a later hit "
        "can use, N (a multiple of block_size) also the tail of every N-token segment, null every "
        "full block",
        "滑动窗口组缓存哪些块：0（vLLM 0.33 的默认值）只缓存之后的命中用得上的块，N（block_size "
        "的倍数）另外缓存每 N 个 token 段末尾的块，null 缓存每个满块"),
    # config.model
    "fd_model_num_layers": ("layers of the tiny model", "小模型的层数"),
    "fd_model_num_kv_heads": ("K/V heads per layer", "每层的 K/V 头数"),
    "fd_model_head_dim": ("size of one head", "每个头的维度"),
    "fd_model_dtype": ("the tensors' number type", "张量的数值类型"),
    # config.connector
    "fd_connector_kind": ("the tier's kind (cpu: vLLM's OffloadingConnector with its CPU manager)",
                          "缓存层的种类（cpu：vLLM 的 OffloadingConnector 及其 CPU 管理器）"),
    "fd_connector_num_blocks": ("the CPU tier's capacity, in chunks of one block",
                                "CPU 缓存层的容量，以一个块大小的 chunk 计"),
    "fd_connector_eviction_policy": ("the tier's cache policy: lru or arc (vLLM eviction_policy)",
                                     "缓存层的淘汰策略：lru 或 arc（vLLM 的 eviction_policy）"),
    "fd_connector_load_delay": ("engine steps until a load is reported done (0: within its step)",
                                "载入任务被报告完成前经过的引擎迭代数（0：在发出的那一步内）"),
    "fd_connector_store_delay": ("engine steps a store takes after it is submitted",
                                 "存入任务提交后需要的引擎迭代数"),
    "fd_connector_sync_load_budget_tokens": ("tokens a step may load synchronously; 0: every load is "
                                             "asynchronous (vLLM's default)",
                                             "每步可以同步载入的 token 数；0 表示全部异步载入（vLLM 默认）"),
    # config.scheduler
    "fd_scheduler_max_num_batched_tokens": ("the token budget of one engine step (default 8192; "
                                            "vLLM's own default depends on the GPU and the entry "
                                            "point, e.g. 8192 for the OpenAI server on an H100)",
                                            "一次引擎迭代的 token 预算（默认 8192；vLLM 自己的默认值取决于"
                                            "GPU 和入口，例如 H100 上的 OpenAI 服务是 8192）"),
    "fd_scheduler_max_num_seqs": ("at most this many requests run at once (default 256; vLLM's "
                                  "default is 1024 on an H100-class GPU, 256 below it)",
                                  "同时运行的请求最多这么多个（默认 256；vLLM 在 H100 级别的 GPU 上默认 "
                                  "1024，更低端的 GPU 上 256）"),
    "fd_scheduler_enable_chunked_prefill": ("false: a prompt is prefilled in one step, so the budget must "
                                            "cover max_model_len",
                                            "false：提示词在一步内全部 prefill"
                                            "，所以预算必须覆盖 max_model_len"),
    "fd_scheduler_long_prefill_token_threshold": ("cap a prefill chunk at this many tokens when others run "
                                                  "or wait; 0: off",
                                                  "有其他请求在运行或等待时，每个 pre"
                                                  "fill 分块最多这么多 token；"
                                                  "0 表示不限制"),
    "fd_scheduler_max_model_len": ("a request stops at this many tokens (FINISHED_LENGTH_CAPPED)",
                                   "请求到这么多 token 就停止（FINISHED_LENGTH_CAPPED）"),
    "fd_scheduler_async_scheduling": ("vLLM's AsyncScheduler: outputs arrive one step late",
                                      "vLLM 的 AsyncScheduler：输出晚一步才到"),
    "fd_scheduler_policy": ("fcfs (first come, first served) or priority: waiting requests by "
                            "priority, then arrival; the victim of a failed allocation is the "
                            "lowest priority, not the last to run",
                            "fcfs（先来先服务）或 priority：等待中的请求按优先级、再按到达顺序排；"
                            "分配失败时抢占优先级最低的请求，而不是最后运行的那个"),
    "fd_scheduler_watermark": ("while any request runs, admit a waiting or preempted request only "
                               "if int(watermark × (num_blocks + 1)) blocks stay free (0 ≤ w < 1)",
                               "有请求在运行时，只有在仍能空出 int(watermark × (num_blocks + 1)) "
                               "个块的情况下，才接纳等待中或被抢占的请求（0 ≤ w < 1）"),
    # arrive
    "fd_arrive_id": ("the request's name (A, B, …)", "请求的名字（A、B……）"),
    "fd_arrive_prompt": ("token ids, words, or parts: tokens, text, same_as, random",
                         "token id、文字，或者片段：tokens、text、same_as、random"),
    "fd_arrive_max_tokens": ("finishes after this many output tokens; unset, until max_model_len, as "
                             "vLLM's OpenAI server sets it (SamplingParams' own default is 16)",
                             "输出这么多 token 后结束；不写时一直到 max_model_len，与 vLLM 的 OpenAI "
                             "服务一致（SamplingParams 自己的默认值是 16）"),
    "fd_arrive_output": ("scripted output tokens instead of the model's argmax",
                         "指定的输出 token（代替模型的 argmax）"),
    "fd_arrive_lora": ("a LoRA adapter's name: it changes the blocks' hashes",
                       "LoRA 适配器的名字：它会改变块的 hash"),
    "fd_arrive_cache_salt": ("a salt mixed into the first block's hash (cache isolation)",
                             "混入第一个块 hash 的盐（隔离缓存）"),
    "fd_arrive_mm": ("multimodal items: their ids enter the hashes of the blocks they cover",
                     "多模态项：它们的 id 会进入所覆盖的块的 hash"),
    "fd_arrive_admit": ("false: only queue it, without an engine step", "false：只排队，不运行引擎迭代"),
    "fd_arrive_priority": ("under the priority policy, lower runs first (ignored under fcfs)",
                           "priority 策略下，数值越小越先运行（fcfs 下忽略）"),
    "fd_arrive_prompt_logprobs": ("ask for prompt logprobs (-1: all; true = 1): the request then "
                                  "does not read the prefix cache, though it still writes it",
                                  "请求 prompt logprobs（-1 表示全部；true 等于 1）：这个请求于是"
                                  "不读前缀缓存，但仍会写入"),
    "fd_arrive_skip_reading_prefix_cache": ("vLLM's skip_reading_prefix_cache: unset, it is true "
                                            "exactly when prompt_logprobs is given",
                                            "vLLM 的 skip_reading_prefix_cache：不写时，给了 "
                                            "prompt_logprobs 就为 true"),
    # decode
    "fd_decode_steps": ("engine steps to run", "要运行的引擎迭代次数"),
    "fd_decode_requests": ("teaching-only: decode only these running requests",
                           "教学用写法：只解码这些运行中的请求"),
    # prompt parts
    "fd_tokens_tokens": ("token ids, as written", "按原样给出的 token id"),
    "fd_text_text": ("words, one token each", "文字，每个词一个 token"),
    "fd_same_as_same_as": ("an earlier request whose tokens to copy", "复制哪个更早的请求的 token"),
    "fd_same_as_first": ("how many of its first tokens (all if left out)",
                         "复制它的前多少个 token（不写则全部）"),
    "fd_random_random": ("this many seeded random tokens", "这么多个（按种子生成的）随机 token"),
    # events with one value
    "fd_event_step": ("how many engine steps", "运行多少次引擎迭代"),
    "fd_event_finish": ("the request (or a list of them) that stops, as on a stop token "
                        "(FINISHED_STOPPED)",
                        "结束的请求（或请求列表），如同采样到停止 token（FINISHED_STOPPED）"),
    "fd_event_abort": ("the request (or a list of them) the client aborts (FINISHED_ABORTED)",
                       "客户端中止的请求（或请求列表）（FINISHED_ABORTED）"),
    "fd_event_reset_prefix_cache": ("bare, or {reset_running_requests: true} to preempt every "
                                    "running request first (then it cannot be refused)",
                                    "单独写，或写 {reset_running_requests: true}：先抢占所有运行中的"
                                    "请求（这样就不会被拒绝）"),
    "fd_event_preempt": ("the running request to preempt (teaching-only)",
                         "要抢占的运行中请求（教学用写法）"),
    "fd_event_checkpoint": ("a name to save the whole engine state under", "保存整个引擎状态所用的名字"),
    "fd_event_rewind": ("a checkpoint's name: the state goes back there", "检查点的名字：状态回到那里"),
    "fd_event_note": ("narration of this step: {en: …, zh: …}", "这一步的说明：{en: …, zh: …}"),
}

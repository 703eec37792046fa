#include "train/run.hpp"

#include <omp.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "io/params_file.hpp"
#include "train/presets.hpp"

namespace noeira {

namespace {

std::filesystem::path data_dir_of(const TrainConfig& cfg, DatasetKind kind) {
  return cfg.data_dir.empty() ? default_data_dir(kind) : std::filesystem::path(cfg.data_dir);
}

template <Module M>
void check_features(const Dataset& data, std::string_view model) {
  if (data.features != M::in_dim) {
    throw InputError(detail::concat("model '", model, "' takes ", M::in_dim,
                                    " inputs per sample, but ", data.name, " has ", data.features,
                                    " (choose a preset for this data set)"));
  }
}

template <Module M>
std::vector<io::NamedParam> named_params(M& model) {
  std::vector<io::NamedParam> out;
  for_each_param(model, [&](const std::string& name, Param& p) { out.push_back({name, &p}); });
  return out;
}

Init model_init(const TrainConfig& cfg, Target target) {
  InitSpec spec;
  spec.kind = InitKind::KaimingNormal;
  spec.seed = cfg.seed;
  return Init(target, spec);
}

void write_config(const std::filesystem::path& file, const TrainConfig& cfg) {
  std::ofstream out(file);
  out << to_json(cfg).dump(2) << '\n';
  if (!out) throw InputError(detail::concat(file.string(), ": cannot write the configuration"));
}

}  // namespace

std::string default_out_dir(const TrainConfig& cfg) {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &local);
  return detail::concat("runs/", cfg.model, "-", cfg.data, "-", stamp);
}

TrainOutcome run_train(const TrainConfig& cfg) {
  validate(cfg);
  const DatasetKind kind = parse_dataset_kind(cfg.data);
  // Resolve every name before the (slow) data load, so a typo fails at once.
  (void)optimizer_config(cfg);
  (void)parse_schedule_kind(cfg.schedule);
  return with_preset(cfg.model, [&]<class M>(std::type_identity<M>) {
    const std::filesystem::path dir = data_dir_of(cfg, kind);
    const Dataset train_set = load_dataset(kind, dir, Split::Train, cfg.limit_train);
    const Dataset test_set = load_dataset(kind, dir, Split::Test, cfg.limit_test);
    check_features<M>(train_set, cfg.model);

    TrainOutcome outcome;
    outcome.out_dir = cfg.out.empty() ? default_out_dir(cfg) : cfg.out;
    const std::filesystem::path out(outcome.out_dir);
    std::error_code ec;
    std::filesystem::create_directories(out, ec);
    if (ec) {
      throw InputError(detail::concat(out.string(), ": cannot create the output directory (",
                                      ec.message(), ")"));
    }
    write_config(out / "config.json", cfg);
    MetricsFile metrics(out / "metrics.jsonl");
    Progress progress(std::cout, std::cerr, cfg.log_format, stdout_is_terminal());

    Context ctx = Context::for_target(Target::Cpu);
    ctx.seed = cfg.seed;
    M model(model_init(cfg, ctx.target));
    outcome.parameters = parameter_count(model);

    progress.note(detail::concat(
        "noeira train: model ", cfg.model, " (", outcome.parameters, " parameters), ", cfg.data,
        " ", train_set.count, " train / ", test_set.count, " test samples from ", dir.string()));
    progress.note(detail::concat("  optimizer ", cfg.optimizer, " lr ", cfg.lr, " (", cfg.schedule,
                                 "), batch ", cfg.batch, ", epochs ", cfg.epochs, ", seed ",
                                 cfg.seed, ", threads ", omp_get_max_threads(), ", output ",
                                 out.string()));

    outcome.summary = train(model, ctx, cfg, train_set, test_set, progress, &metrics);

    const std::filesystem::path params_file = out / "model.h5";
    io::save_params(params_file, cfg.model, named_params(model));
    progress.note(detail::concat("saved ", params_file.string(), "; metrics in ",
                                 metrics.path().string()));
    return outcome;
  });
}

EvalResult run_eval(const TrainConfig& cfg) {
  if (cfg.params.empty()) throw InputError("eval needs --params <file> (e.g. runs/<run>/model.h5)");
  if (!(cfg.eval_batch > 0)) {
    throw InputError(detail::concat("--eval-batch must be positive, got ", cfg.eval_batch));
  }
  const DatasetKind kind = parse_dataset_kind(cfg.data);
  const std::string stored = io::read_params_model(cfg.params);
  const std::string model_name = cfg.model.empty() ? stored : cfg.model;
  return with_preset(model_name, [&]<class M>(std::type_identity<M>) {
    const Dataset test_set =
        load_dataset(kind, data_dir_of(cfg, kind), Split::Test, cfg.limit_test);
    check_features<M>(test_set, model_name);
    Context ctx = Context::for_target(Target::Cpu);
    M model(model_init(cfg, ctx.target));
    io::load_params(cfg.params, model_name, named_params(model));
    Batch batch(ctx.target);
    CrossEntropyLoss loss;
    return evaluate(model, ctx, test_set, cfg.eval_batch, batch, loss);
  });
}

}  // namespace noeira

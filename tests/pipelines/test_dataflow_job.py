"""The rollout as a Dataflow job, built offline: Beam's DataflowRunner with --dry_run builds the
job (the Runner v2 pipeline proto and the job request) and submits nothing. The job graph holds
the rollout's named steps, and the worker image and package options reach it."""

from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.portability.api import beam_runner_api_pb2

from flywheel.settings.layout import RunLayout
from flywheel.pipelines.rollout import IterationSpec, run_rollout

from tests.run_configs import tiny_config

STEPS = ["ReadTasks", "ExpandTrain", "ExpandHeldout", "Generate", "Execute", "Verify",
         "NormalizeRewards", "FilterTrajectories", "WriteTrajectories", "WriteMetrics", "WriteErrors"]
IMAGE = "us-docker.pkg.dev/demo-project/flywheel/worker:latest"


def test_the_rollout_builds_as_a_dataflow_job_offline(tmp_path):
    setup = tmp_path / "setup.py"
    setup.write_text("import setuptools\nsetuptools.setup(name='x')\n")
    options = PipelineOptions([
        "--runner=DataflowRunner", "--project=demo-project", "--region=us-central1",
        "--job_name=flywheel-iteration-0", "--temp_location=gs://demo-bucket/tmp",
        "--staging_location=gs://demo-bucket/staging", "--no_auth", "--dry_run=True",
        f"--sdk_container_image={IMAGE}", f"--setup_file={setup}"])
    config = tiny_config(domains=("add", "pyexpr"), tasks_per_domain=2, heldout_per_domain=1, n_samples=2)
    result = run_rollout(config, IterationSpec("df", 0, policy_version=0, checkpoint_uri=None),
                         RunLayout("gs://demo-bucket/runs/df"), options)
    job = result.job
    names = {t.unique_name for t in job.proto_pipeline.components.transforms.values()}
    assert {f"Rollout/{step}" for step in STEPS} <= names, sorted(names)
    images = {beam_runner_api_pb2.DockerPayload.FromString(env.payload).container_image
              for env in job.proto_pipeline.components.environments.values() if env.payload}
    assert images == {IMAGE}, images
    assert job.proto.name == "flywheel-iteration-0" and job.google_cloud_options.project == "demo-project"
    assert job.options.get_all_options()["setup_file"] == str(setup)
